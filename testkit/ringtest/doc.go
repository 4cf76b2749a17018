// Package ringtest is the in-process test harness of the ring coordinator: it starts real
// coordinators (Raft voters on loopback TCP, real RSocket) and real lease clients in one process,
// puts every party behind its own fault proxy, records the history of leases as the workers held
// them, and checks that history against the invariants of docs/product.md.
//
// What it owns:
//   - the history checker (history.go, analysis.go): pure functions over intervals during which a
//     worker's guard would let it use a set of ranges (and the Node-0 role), on one monotonic clock.
//     Exclusivity (no token usable by two holders at one instant), one Node-0 and one incarnation per
//     worker id at a time, coverage of the whole ring inside settled windows, no range lost across a
//     leader change (CheckKept);
//   - the recorder (recorder.go): builds those intervals from the lease clients' OnLease and Drain
//     hooks and the harness's stop paths, and keeps a timeline of events (timeline.go reads the
//     instants tests order: a crash detected, ranges taken over, a lease stream resumed);
//   - the cluster harness (cluster.go, coord.go, worker.go): NewCluster, coordinators behind a Raft
//     proxy and an RSocket front proxy each, workers with a network of their own, faults, and
//     bounded waits.
//
// Every worker connection, to whichever coordinator and after any not_leader redirect, passes
// through that coordinator's front proxy, which reads the RSocket SETUP frame to learn the worker
// and incarnation (setup.go) and makes the connection obey the worker's own proxy too. So
// Worker.Hang and Worker.Cut act on all of a worker's traffic, and Coordinator.Hang and
// Coordinator.Cut on all of a coordinator's, Raft included, without any hook in the lease client.
//
// What it must never do: listen on anything but loopback, leave a goroutine, a listener or a data
// directory behind a test (Close, registered with t.Cleanup, closes everything and fails the test if
// a goroutine of the coordinator, the lease client, the proxies or Raft survives), wait without a
// bound, or assert on how long something took: tests only check behaviour. Clusters of one test
// binary must not run in parallel (the leak check and the routing of rsocket-go's global logger
// are process-wide).
//
// Usage:
//
//	c := ringtest.NewCluster(t, ringtest.Options{})   // 3 voters, a leader elected
//	a, b := c.AddWorker("a"), c.AddWorker("b")
//	c.WaitSettled(20 * time.Second)                    // equal shares; coverage owed from here
//	c.KillLeader()
//	b.Cut()                                            // a fault: the settled window ends here
//	c.WaitSettled(20 * time.Second)
//	a.Leave()
//	c.CheckHistory()                                   // fails the test with every violation
//
// Component logs are kept in memory and printed when a test fails; RINGTEST_LOG=debug raises
// their level. The random scenario test takes RINGTEST_SEEDS=n (run n seeds) and RINGTEST_SEED=s
// (run seed s alone).
package ringtest
