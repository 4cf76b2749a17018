// Command drain measures figure 2 of docs/benchmarks.md: how fast workers drain the retry
// directory, and how many tombstones their reads scan, as the history of processed failures
// grows; against a naive queue on the same Cassandra in the same run.
//
// Ours: a backdated history written through the recorder's late protocol (consecutive one-minute
// windows, the same instances in each), drained segment by segment by 1 and by 3 workers
// (worker.Scanner, no-op executor, concurrency 100 each) that split the ring with lease.Split and
// hold static leases: no coordinator is involved. Before each segment is drained, one query of
// each tier is traced (the reads the next cycle makes); after it, the scans of tiers 1 and 2
// that every idle cycle repeats.
//
// The naive queue: one table keyed ((shard), retry_at, transaction_id), one shard per consumer,
// read with `retry_at <= now LIMIT page` and emptied by a row delete per processed failure. Its
// deleted rows pile up in front of the live ones, so every poll scans all of them, until
// Cassandra aborts the read at tombstone_failure_threshold (100,000 by default). Before each
// segment is drained, one poll is traced. naive+markers is the same queue with our worker's STRICT
// marker protocol around each execution, so that only the queue design differs from ours.
//
// Both report Cassandra's tombstones_per_read histogram per table, and the reads of the run's
// keyspace that its logs show over tombstone_warn_threshold or aborted at the failure threshold. Every run uses a keyspace of its own (bench_drain_*),
// dropped at the end unless -keep.
//
// With -cluster it measures figure 19 instead (issue 19): ours alone, the same load on the shared
// single node (-cassandra, replication 1), on -own (a single node started with the cluster nodes'
// settings, replication 1) and on the cluster (-cluster-replication, dc1=3), all at -consistency
// (the product's LOCAL_QUORUM), with no tombstone probe. Each segment's record and drain phases
// report the CPU seconds of each target's Cassandra JVMs (a JVM belongs to the target whose host is
// the listen_address of its cassandra.yaml), of the other Cassandra JVMs, of this process (the
// recorder, then the in-process workers) and of the rest of the machine (/proc/stat), so that a
// reader sees where the 2 cores went. With -kill-node K it then drains -recovery-total on the
// cluster twice, with the largest -workers count: as it is, and with node K SIGKILLed -kill-after
// into the drain and started again -restart-after later (scripts/cassandra.sh cluster-kill and
// cluster-start); it reports the longest gap between executions, the rates around the kill and
// after the node's return, the transactions executed twice and the ones never executed (lost).
//
// It must never assert on a timing, run without a bound (-max-run), or touch another keyspace.
//
//	go run ./bench/drain -total 150000 -segment 15000 -workers 1,3 -impl ours,naive,naive+markers
//	go run ./bench/drain -cluster 127.0.0.2:9042,127.0.0.3:9042,127.0.0.4:9042 -own 127.0.0.5:9042 -impl ours \
//		-total 15000 -segment 15000 -workers 1,3 -kill-node 3
package main
