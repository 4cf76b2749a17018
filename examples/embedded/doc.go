// Command embedded is a service that embeds retryring: the "embedded worker fleet" way to use it.
//
// Every instance of the service (a payments service here) is two things at once:
//   - a regular node: when a charge fails for a passing reason, it records the failure with
//     recorder.New / Record (the W+1 write path, one Cassandra statement per failure in steady
//     state) and moves on;
//   - a retry worker: leaseclient joins the ring of (region, cluster, service) through the
//     coordinator cluster, and worker.New drains the tokens the lease grants, calling the
//     service's own worker.Executor in process (chargeExecutor) instead of an HTTP endpoint.
//
// The coordinator cluster stays separate (retryring coordinator). There is no retry-worker
// deployment to run: the service's instances are the fleet, and the ring rebalances as they come
// and go. An instance retries the failures whose instance-id token lies in its lease, which may
// be another instance's, so the Executor must be able to run any recorded step from its
// transaction id alone (here the order id is all the gateway needs; a real service loads the
// saga from its event store).
//
// What it must never do: execute without the guard's consent (worker.Scanner asks it before
// every query and every call), charge twice (the gateway is idempotent by order id, and a
// COMMITTED marker stops re-scans), or drop a failure silently (a charge that could not be
// recorded is logged as an error for the caller).
//
// See README.md for how to run it.
package main
