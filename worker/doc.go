// Package worker is a retry worker's data plane: the traversal of the five-tier retry directory,
// the execution of what it finds under STRICT execution markers, the data compaction of what it
// finished (tiers 5, 4, 3), and, while it is Node-0, the directory compaction of tiers 2 and 1
// behind the two gates.
//
// What it owns: the order of the traversal, the bounded and backpressured execution of rows,
// what a transient or permanent failure becomes, and every delete of the retry directory.
//
// What it must never do:
//   - run a CQL query or an execution that the guard (the lease) did not allow just before, with
//     that operation's timeout as the validity it needs; touch an instance whose token lies
//     outside the current lease;
//   - delete a bucket partition unless every row read from it finished (done, dead-lettered, or
//     recorded again into a later window); a partial bucket is kept whole;
//   - delete a tier-2 window or a tier-1 day unless it is Node-0 and both gates passed;
//   - execute a step whose marker is COMMITTED;
//   - delete a directory row (or a bucket partition) that a writer may be racing with any
//     timestamp but the checked delete's: its write clock read before it checked that the level
//     below is empty, minus max_clock_offset, in the CQL; check and delete in one guarded
//     operation, so that no release of the token comes between them (docs/schema.md);
//   - skip a day for being old: every live day of last year and this year is visited.
//
// # The traversal, by example
//
// A cycle (Scanner.Cycle) goes down the tiers, oldest first:
//
//	tier 1  es_days_by_year              days of last year and this year, from the year's checkpoint,
//	                                     plus the lookback days (today and LookbackDays before)
//	tier 2  es_retry_windows_by_day      per day, windows from the day's checkpoint, earliest first,
//	                                     up to the first one not readable (clock < start + offset)
//	tier 3  es_instances_by_retry_window per window, one query per leased range:
//	                                     instance_id_token >= start AND instance_id_token <= end
//	tier 4  es_buckets_by_instance       per instance, its buckets
//	tier 5  es_retry_transactions_by_instance
//	                                     per bucket, rows page by page; each row takes a slot of
//	                                     the Concurrency semaphore before it runs, so the next page is
//	                                     read only when the current one is dispatched
//
// Each row: read its marker (span_key = impl type; each state in cells of its own, read in this
// order, so that no later write of a stalled or duplicate copy hides a COMMITTED); COMMITTED →
// skip for good; a floor above the
// row's copy (replay generation, attempt) → skip for good, superseded: a newer copy of the step
// runs at the window its backoff chose (invariant 9); DEAD_LETTERED without a floor (written
// before floors were) → skip for good; another worker's IN_PROGRESS that has not expired → leave
// the row for a later pass; else, once the row is admitted (see "Before an execution starts"),
// write IN_PROGRESS (TTL = ExecTimeout + MarkerMargin) and execute. A call that never reached the
// downstream (NotSent: the executor refused it past its deadline) is no outcome: no attempt is
// used and the row stays unfinished. Otherwise the outcome (classified by the executor; the stock
// HTTP one by the step's retry policy, package retrypolicy) decides: done → COMMITTED (TTL =
// MarkerRetention); transient → recorded again with attempt+1 into the window d ahead, d =
// min(L×2^attempt, max delay) jittered to d × (1/2 + u/2) with u drawn from (transaction,
// attempt), and no earlier than a 429's or 503's Retry-After (capped at the max delay), then the
// step's floor raised to that copy; permanent, or transient after MaxAttempts executions →
// dead-lettered, the floor raised past every copy of its replay generation, and the marker set
// DEAD_LETTERED. When every row of a bucket finished, the bucket partition is deleted (one
// partition tombstone), then its tier-4 row; when every bucket of an instance is gone, its tier-3
// marker. Then, if the lease makes this worker Node-0, the directory compaction pass (see
// compact.go).
//
// What a row goes through is decided by a step function that does no I/O (rowState.next in
// rowstep.go, its transcripts in testdata/row); runRow only performs the actions it answers.
//
// Every query and every execution goes through the guard first, with its own timeout as the
// validity it needs, and runs bounded by that timeout. A refusal keeps what it interrupted: the
// bucket and the instance stay whole for a later pass, by this worker or the next owner of the
// token. Refusals are counted and logged as one line per 10 s with the count by reason; a kept
// bucket's line says why its rows were left (guard refusal, paused, breaker open, failed query,
// in progress elsewhere, ...).
//
// # Before an execution starts
//
// A row whose marker calls for a call is held (left unfinished, its bucket kept, no attempt
// used, no IN_PROGRESS written) while:
//   - the operator paused the ring (the lease's controls, docs/protocol.md section 7.2): then no
//     traversal starts either, and one under way stops at the next window; calls in flight finish
//     and settle. The one read of a paused ring is the pause sweep (sweep.go), every
//     Config.PauseSweepEvery (an hour): rows are only checked against their markers, so that a
//     bucket kept through a long pause is carried before its handled rows' markers expire;
//   - the operator paused its impl type;
//   - the circuit breaker of its impl type is open (breaker.go): at least half of the last 50
//     executions of the type (20 at least) were transient; after a cool-off of 10 s (doubling
//     while probes fail, 5 min at most) three probes go, and the breaker closes when they succeed;
//   - it waits for a token of the throttle, whose rate is this worker's share of the ring's limit
//     (rate_per_s) capped by Config.MaxRate; the guard is asked after the wait, never before it,
//     and a row whose lease changed epoch meanwhile is held too (its marker may be stale).
//
// # What the worker says about itself
//
// LeaseFit checks the timeouts against the least validity of the lease in force, TTL − 2 ×
// renewal of the element (not any flag): when they do not fit, the guard refuses them for part of
// every renewal period, so the worker logs an error naming the figures and the flag to change,
// and the binary's /readyz answers 503 with that reason. Report is what ring.report carries:
// executions by outcome, dead letters, guard refusals, breakers not closed, the oldest readable
// window its last complete pass left unfinished and the rows it left there, and, from Node-0,
// the oldest live window of the whole directory. Metrics exposes the counters and the gauges
// (lease_fit, paused, execution_rate_limit, breaker_state per impl type).
//
// Wiring it up:
//
//	st, _ := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1})
//	ex, _ := executor.NewHTTP(executor.HTTPConfig{URL: executorURL})
//	sc, err := worker.New(worker.Config{
//		Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "worker-1",
//	}, st, leaseClient.Guard(), ex)
//	// leaseclient.Config{Drain: sc.Drain, Report: sc.Report} lets the lease client wait for work
//	// on dropped tokens and send what the worker saw.
//	prometheus.MustRegister(worker.NewMetrics(sc))
//	go sc.Run(ctx) // cycles until ctx ends; sc.Stats() for counters
package worker
