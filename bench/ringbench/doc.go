// Command ringbench measures the ring coordinator's failure handling with real processes on
// loopback: 3 `retryring coordinator` processes and 8 lease-only workers (bench/leaseprobe), each a
// process of its own, so that SIGSTOP and kill -9 hit a worker exactly as they would in production.
//
// Per trial it injects one fault into a settled ring and reads the outcome from the coordinators'
// GET /v1/ring and from the probes' event streams (one JSON line per installed lease, stamped with
// the wall clock; every process on one machine reads the same wall clock):
//   - stop: SIGSTOP of a probe until the leader's view shows the member departed; then SIGCONT;
//   - kill: kill -9 of a probe until departed (crash detection), and until the surviving probes'
//     valid leases cover the whole ring again (takeover); then the probe restarts as a new
//     incarnation;
//   - leave: SIGTERM makes a probe call Leave; from that call until the ranges it held are in other
//     probes' installed leases (and until the whole ring is); then it restarts;
//   - leader: kill -9 of the leader coordinator until a new leader is seen, until the first lease
//     element from another coordinator reaches any probe and every probe, and whether any probe's
//     guard had no valid lease at some instant in between; then the coordinator restarts.
//
// After each trial it waits until the ring is settled again: every probe an active member holding
// exactly its equal share, its guard holding that assignment, no departed member left. Faults fall
// at a random phase of the renewal period.
//
// The baseline runs in the same process, in parallel with the trials: a plain rsocket.Receive() TCP
// server, without the read-deadline cap the coordinator puts on its connections, and clients (this
// binary again, in client mode, keeping alive as the lease client does) that are SIGSTOPped; measured until the
// server's OnClose fires. rsocket-go's server keeps a 90 s read deadline whatever the client's
// SETUP says, so this takes about 90 s, and costs that once for all its clients.
//
// -timing old,new measures each lease timing on a cluster of its own, one after the other, in one
// run (old: TTL 3 s, renewal 1 s, the default before issue 9; new: the defaults since), and adds a
// table with both side by side; the baseline runs once, beside the first.
//
// It prints a markdown table (median, p99, min, max per figure) with the command, the machine and
// the load average, then every raw value. It never asserts on a timing: a trial whose end point is
// not reached within a generous bound is reported as timed out, and the run goes on.
//
// The coordinators are a proc.Cluster without workers, started as the end-to-end tests and the
// demo start theirs; the probes are launched into its process group. What is this program's own:
// the probes and their event streams (cluster.go, probes.go), the trials, the baseline, the report.
//
// What it must never do: leave a process behind (every child runs in its own process group and
// dies with this process, see internal/proc), listen on anything but loopback, or run without a
// bound (-max-run, and a bound on every wait).
//
//	go run ./bench/ringbench                 # 20 trials per figure, ~10 minutes on 2 cores
//	go run ./bench/ringbench -trials 3 -figures kill -baseline-clients 0
//	go run ./bench/ringbench -timing old,new -trials 10 -max-run 40m
package main
