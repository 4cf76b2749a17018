// Package recorder is the regular-node write path: it records a failed saga step into the
// retry directory so that retry workers find it, following the write protocol of
// docs/schema.md.
//
// A failure recorded at time t goes into W+1, the window after the one t is in. Before its
// tier-5 row, the recorder makes sure the directory rows that lead to it exist (tier 1 day,
// tier 2 window, tier 3 instance marker with the Murmur3 token, tier 4 bucket). Those rows are
// written once per key per process: the recorder remembers what it wrote until the window
// starts, and concurrent first writers of one key share a single write. A per-window counter
// assigns row n to bucket n / BucketSize, so no bucket partition grows past BucketSize rows
// per writer. In steady state a failure costs one statement.
//
// RecordAt writes into a chosen window: a later one (a worker re-recording a transient failure
// under its original instance id) follows the same protocol; a window whose time has come
// (a --backdate import) follows the late protocol instead: fresh buckets, directory published
// bottom-up, scan checkpoints lowered.
//
// It must never write into a window its clock has entered on the normal path (every write is
// bounded by the target window's start), never write a tier-5 row before the directory that
// leads to it, never query Cassandra to count rows, and never talk to the coordinator. Nor
// write on a clock nobody checks: New requires a ClockCheck (a clockcheck.Monitor that has
// measured the clock against Cassandra's), or UncheckedClock to take the risk knowingly.
//
//	mon, err := clockcheck.NewMonitor(clockcheck.Config{Prober: clockcheck.NewCassandraProber(session, nil)})
//	err = mon.Measure(ctx) // then go mon.Run(ctx)
//	rec, err := recorder.New(store, recorder.Config{InstanceID: podName, WindowMinutes: 1, ClockCheck: mon})
//	where, err := rec.Record(ctx, recorder.Failure{TransactionID: id, ImplType: "Payment"})
package recorder
