// Package proc launches and controls real retryring processes for the end-to-end tests, the
// chaos run, the demo (`retryring demo`), the ring benchmark (bench/ringbench) and anything else
// that needs the binary as a person would run it: coordinators and workers as separate
// operating-system processes on loopback ports, with the stub downstream service
// (internal/downstream) in the calling process. There is one way to start a coordinator, a worker
// and a fleet of them; what differs between its users is only what they do with it.
//
// What it owns:
//   - Process: one launch of a binary, with its own process group, its output in a log file of its
//     own, and the faults a test needs: Kill9, Stop (SIGSTOP), Cont (SIGCONT), Term (SIGTERM with a
//     bounded wait, then SIGKILL), Restart (the same command line again, appending to the same log);
//   - Group: every process of one user, with their logs in one directory (GroupIn); Close kills
//     and reaps them all and leaves the directory to its owner;
//   - Cluster: N coordinators (3 by default) that bootstrap from one --peers list, M workers of one
//     ring, and one downstream stub, all in one Group (StartCluster, Close; Stop ends them
//     gracefully, workers first); leader discovery through GET /v1/ring; waits for a settled
//     ring; `retryring record` and `retryring schema apply` as one-shot processes; a sampler of the
//     leader's ring view that measures how long any part of the ring had no usable lease;
//   - the test wrappers NewGroup(t) and NewCluster(t, opts): a directory per test, t.Fatal when the
//     cluster does not start, Close in t.Cleanup, and the paths and the last lines of every log
//     printed when the test failed.
//
// Every constructor but the test wrappers returns an error and never exits; a start that fails
// leaves what it launched in the Group, for its owner to close (after reading the logs).
//
// What it must never do:
//   - leave a process behind: every process runs in its own process group, signals go to the whole
//     group, Close (for a test, its Cleanup) kills and reaps them, and on Linux each child gets
//     SIGKILL when the thread that launched it dies (Pdeathsig), so even a test binary killed by a
//     timeout, or a demo killed with SIGKILL, leaves no orphan behind;
//   - wait without a bound: every wait takes a context or a timeout;
//   - listen on, or hand out, anything but loopback;
//   - pass its own RETRYRING_* environment on (to a child or to `go build`): every flag of the
//     binary also reads RETRYRING_<FLAG>, so an exported RETRYRING_CASSANDRA in the shell would
//     silently change a child.
//
// Ports: FreePort listens on 127.0.0.1:0, reads the port and closes the listener; the child binds
// it a moment later. Another process may take the port in between (a small race, made smaller by
// never handing the same port out twice in one process). A child that loses the race exits at
// once with "address already in use"; Cluster notices it in the child's log and launches again
// on fresh ports (coordinators all together, since their Raft addresses are in every --peers, each
// time with fresh data directories).
//
// Usage in a test:
//
//	c := proctest.NewCluster(t, proc.Options{Binary: bin, Keyspace: ks, Workers: 3}) // schema, 3 coordinators, 3 workers
//	view, err := c.WaitSettled(ctx)              // every worker active, the ring covered
//	batch, err := c.Record(ctx, proc.RecordOptions{Count: 2000, Backdate: 10 * time.Minute})
//	w := c.Workers()[0]
//	err = w.Kill9()
//	err = c.RestartWorker(ctx, w)                // same id, a new incarnation
//	leader, _, err := c.Leader(ctx)              // asks every coordinator's GET /v1/ring
//	sampler := c.SampleLeases(0)                 // ... faults ...; sampler.Stop().Workers.LongestGap
//	dups := c.Downstream.Duplicates()
//
// Anywhere else:
//
//	g, err := proc.GroupIn(dir)
//	defer g.Close()                              // kills whatever a failed start left
//	c, err := proc.StartCluster(ctx, g, proc.Options{Binary: bin, Workers: -1})
//	defer c.Close()
//	ws, err := c.AddWorkers(ctx, 3)              // launched together, then each waited for
//	err = c.Stop(15 * time.Second)               // workers leave the ring, then coordinators stop
package proc
