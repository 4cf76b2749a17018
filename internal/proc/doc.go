// Package proc launches and controls real retryring processes for the end-to-end tests, the
// chaos run and anything else that needs the binary as a person would run it: coordinators and
// workers as separate operating-system processes on loopback ports, with the stub downstream
// service (internal/downstream) in the calling process.
//
// What it owns:
//   - Process: one launch of a binary, with its own process group, its output in a log file of its
//     own, and the faults a test needs: Kill9, Stop (SIGSTOP), Cont (SIGCONT), Term (SIGTERM with a
//     bounded wait, then SIGKILL), Restart (the same command line again, appending to the same log);
//   - Group: every process of one test, killed when the test ends (t.Cleanup), with the paths and
//     the last lines of every log printed when the test failed;
//   - Cluster: N coordinators (3 by default) that bootstrap from one --peers list, M workers of one
//     ring, and one downstream stub; leader discovery through GET /v1/ring; waits for a settled
//     ring; `retryring record` and `retryring schema apply` as one-shot processes; a sampler of the
//     leader's ring view that measures how long any part of the ring had no usable lease.
//
// What it must never do:
//   - leave a process behind: every process runs in its own process group, signals go to the whole
//     group, the test's Cleanup kills and reaps them, and on Linux each child gets SIGKILL when the
//     thread that launched it dies (Pdeathsig), so even a test binary killed by a timeout leaves no
//     orphan behind;
//   - wait without a bound: every wait takes a context or a timeout;
//   - listen on, or hand out, anything but loopback;
//   - pass its own RETRYRING_* environment on: every flag of the binary also reads RETRYRING_<FLAG>,
//     so an exported RETRYRING_CASSANDRA in the test's shell would silently change a child.
//
// Ports: FreePort listens on 127.0.0.1:0, reads the port and closes the listener; the child binds
// it a moment later. Another process may take the port in between (a small race, made smaller by
// never handing the same port out twice in one test process). A child that loses the race exits at
// once with "address already in use"; Cluster notices it in the child's log and launches again
// on fresh ports (coordinators all together, since their Raft addresses are in every --peers).
//
// Usage:
//
//	c := proc.NewCluster(t, proc.Options{Binary: bin, Keyspace: ks, Workers: 3}) // schema, 3 coordinators, 3 workers
//	view, err := c.WaitSettled(ctx)              // every worker active, the ring covered
//	batch, err := c.Record(ctx, proc.RecordOptions{Count: 2000, Backdate: 10 * time.Minute})
//	w := c.Workers()[0]
//	err = w.Kill9()
//	err = c.RestartWorker(ctx, w)                // same id, a new incarnation
//	leader, _, err := c.Leader(ctx)              // asks every coordinator's GET /v1/ring
//	sampler := c.SampleLeases(0)                 // ... faults ...; sampler.Stop().Workers.LongestGap
//	dups := c.Downstream.Duplicates()
package proc
