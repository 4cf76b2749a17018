// Package benchkit is what the benchmark programs under bench/ share: a session and a keyspace
// of their own on the test Cassandra, a description of the machine a figure was measured on, a
// static lease for workers run without a coordinator, backdated histories written through the
// recorder, and three ways to see the tombstones a read scanned (query tracing, Cassandra's
// per-table tombstones_per_read histogram, and its logs: tombstone_warn_threshold warnings in the
// tombstone log, tombstone_failure_threshold aborts in the system log).
//
// What it must never do: touch a keyspace it did not create (every keyspace it makes is named
// bench_*, and only those are dropped), assert on a timing (it measures and prints), or start,
// stop or reconfigure Cassandra: the benchmarks run against the node scripts/cassandra.sh
// started, alongside whatever else uses it.
package benchkit
