// Package leaseclient is a retry worker's side of the wire protocol (docs/protocol.md): it opens an
// RSocket connection to the coordinator cluster, follows not_leader redirects to the Raft leader,
// subscribes to the ring.leases stream, installs every lease element in a *lease.Guard, releases
// ranges it stopped using after an epoch change, leaves gracefully, and reconnects after any failure
// while keeping the process's incarnation. Reconnects follow docs/protocol.md section 9 (dialPlan in
// redial.go): the next address of the list after a failure, never the one that just failed; while a
// usable lease is held the first retry at once and the next ones after a jittered 100 ms doubling
// to about 1 s, so that a leader failover shorter than the lease costs no range without a fleet of
// retries becoming a storm; the backoff to seconds only once the lease is gone.
//
// Its SETUP announces the "controls" feature, so every element carries the ring's flow controls
// (pause, impl pause, rate), which reach the data plane as lease.Lease.Controls with the element's
// renewal period. Beside the stream it sends ring.report, what Config.Report returns, every
// ReportPeriod and right after each new lease; a report that fails is only logged at debug, and a
// coordinator that predates the route (unknown_route) gets none on that connection.
//
// With Config.TLS every connection is TLS (protocol.md section 1.1), verified under the host name
// dialled; a refused handshake or certificate is reported with its cause (the TLS alert the
// coordinator sent, or a hint when the coordinator has TLS off) in the error that ends the session.
//
// CheckCredentials asks whether the coordinators admit the client's SETUP and TLS without joining
// the ring (no lease stream, no demand): a worker runs it while it waits for Cassandra, so that a
// refused token or certificate shows before it could work (ErrRefused).
//
// What it owns: the connection, the demand accounting of the ring.leases stream (exactly one element
// of demand outstanding, the worker's monotonic send time of each demand), the Guard's contents, and
// the order "stop using dropped tokens, drain, then ring.release".
//
// What it must never do:
//   - extend a lease on its own: an element is valid for ttl_ms from the moment the demand it answers
//     was sent, never from its receipt, and nothing but a new element moves the guard forward. When
//     the coordinator is unreachable the client does nothing special: the guard stops the lease at
//     expiry by itself.
//   - send ring.release before the Guard refuses the dropped tokens and the Drain hook has returned
//     without error; a failed Drain means no release (the coordinator then waits for expiry).
//   - keep a payload buffer past the callback that received it (rsocket-go pools them).
//   - run a Cassandra query or an execution: the data plane does that, asking Guard() first.
//
// Usage:
//
//	c, err := leaseclient.New(leaseclient.Config{
//		WorkerID:     "worker-1",
//		Ring:         lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
//		Coordinators: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
//		Logger:       log,
//		Drain:        traversal.Drain, // finish or abandon work on tokens that left the lease
//		Report:       traversal.Report, // what the operator sees of this worker (ring.report)
//	})
//	go c.Run(ctx)              // returns after Leave, or when ctx ends
//	guard := c.Guard()         // the data plane checks it before every query and execution
//	...
//	err = c.Leave(shutdownCtx) // on SIGTERM: stop using every range, ring.leave, stop Run
package leaseclient
