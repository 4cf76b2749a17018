// Package e2e runs retryring as a person would: the real binary as separate processes (three
// coordinators and several workers, started by internal/proc), the real Cassandra of
// scripts/cassandra.sh, and a stub downstream service (internal/downstream) that records every
// execution by transaction, instance, worker and lease epoch. Each scenario has a keyspace and a
// cluster of its own.
//
// Scenarios (short versions in `make test`, about ten minutes on two cores):
//   - steady drain, with a fraction of permanent failures that must be dead-lettered;
//   - a worker killed with SIGKILL, then restarted;
//   - a worker frozen with SIGSTOP for longer than its lease, then resumed: it must not act on
//     its stale lease;
//   - a rolling restart of every worker with SIGTERM: nothing may be executed twice;
//   - the coordinator leader killed;
//   - two of three coordinators down: workers stop when their lease ends, resume with quorum;
//   - workers added in the middle of a drain;
//   - imports landing again and again in a window that workers drain and Node-0 compacts;
//   - a backlog in a window whose time has passed while W+1 is being written (Node-0 must not move
//     the scan checkpoint past the busy window);
//   - the real W+1 path in real time (one-minute windows, failures recorded now, a downstream
//     that answers 503 at first);
//   - clocks apart by up to max_clock_offset (a binary built with the skewclock tag, package
//     wallclock): the recorder 0.8 s behind, one worker 0.8 s ahead, while a late writer keeps
//     importing into windows being drained (TestClockSkew, its own top-level test, which also
//     proves that the shipped binary ignores the skew's variable);
//   - Cassandra restarted gracefully in the middle of a drain (its own top-level test, run after
//     the others, since every scenario needs Cassandra; it restores Cassandra in any case).
//
// After each scenario: every recorded transaction is done (at the stub) or dead-lettered (in
// es_dead_letters), none both; every transaction executed twice is explained by a fault that
// left it in flight (at most as many as could be in flight), and none after graceful operations;
// no instance was executed by two workers at overlapping times or went back to a worker under a
// stale epoch; the directory is as product.md's invariant 8 says (tiers 3-5 empty, tier 2 only
// windows whose time has not passed, tier 1 only days not over).
//
// The long chaos run (E2E_LONG=1, `make chaos`) records at least 100,000 failures over at least
// five minutes while faults hit on a schedule, and prints: lost, executed twice, the longest time
// any part of the ring had no usable lease, and the time to drain after the last fault.
//
// The binary is built once per run from this tree (E2E_BIN names another; E2E_RACE=1 builds it
// with the race detector). Logs of every process are kept and printed when a scenario fails
// (E2E_KEEP_LOGS=1 keeps them always).
//
// What this package must never do: assert on how long something took (a bound that safety
// implies, such as "no execution after the lease ended", is behaviour, not timing); leave a
// process or a keyspace behind; leave Cassandra stopped.
package e2e
