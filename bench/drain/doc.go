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
// It must never assert on a timing, run without a bound (-max-run), or touch another keyspace.
//
//	go run ./bench/drain -total 150000 -segment 15000 -workers 1,3 -impl ours,naive,naive+markers
package main
