package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/benchkit"
)

// The naive queue: what a retry table looks like without a directory. Its rows are ordered by
// retry_at inside a shard's partition; a consumer polls the due rows and deletes each one it
// processed. gc_grace_seconds is Cassandra's default (10 days), so nothing purges the row
// tombstones during a run.
const (
	naiveTable = `CREATE TABLE IF NOT EXISTS %s.naive_retry_queue (
    shard          int,
    retry_at       timestamp,
    transaction_id text,
    allocation_key text,
    impl_type      text,
    attempt        int,
    PRIMARY KEY ((shard), retry_at, transaction_id)
) WITH CLUSTERING ORDER BY (retry_at ASC, transaction_id ASC)`
	naiveInsert = `INSERT INTO %s.naive_retry_queue (shard, retry_at, transaction_id, allocation_key, impl_type, attempt)
VALUES (?, ?, ?, ?, ?, ?)`
	naivePoll = `SELECT retry_at, transaction_id, allocation_key, impl_type, attempt FROM %s.naive_retry_queue
WHERE shard = ? AND retry_at <= ? LIMIT ?`
	naiveDelete = `DELETE FROM %s.naive_retry_queue WHERE shard = ? AND retry_at = ? AND transaction_id = ?`
)

type naiveQueue struct {
	s      *gocql.Session
	ks     string
	shards int
	page   int
	conc   int
	base   time.Time // retry_at of the first row; later rows follow it
	seq    int
	// markers, when set, runs the STRICT marker protocol around each execution.
	markers *cassandra.Store
}

// errAborted marks a poll that Cassandra refused to finish.
var errAborted = errors.New("read aborted")

// runNaive drains the naive queue with one consumer per shard. With markers, each row also goes
// through the worker's STRICT marker protocol (read the marker, write IN_PROGRESS, execute, write
// COMMITTED) on the retry directory's marker table, so that only the queue differs from ours.
func runNaive(ctx context.Context, kit *benchkit.Flags, s *gocql.Session, o options, consumers int, markers bool) (string, error) {
	name := "naive"
	if markers {
		name = "naive+markers"
	}
	// The directory's schema too: its marker table serves naive+markers.
	ks, err := benchkit.NewKeyspace(ctx, s, fmt.Sprintf("drain_naive_w%d", consumers))
	if err != nil {
		return "", err
	}
	defer kit.DropKeyspace(s, ks)
	if err := s.Query(fmt.Sprintf(naiveTable, ks)).WithContext(ctx).Exec(); err != nil {
		return "", err
	}
	q := &naiveQueue{s: s, ks: ks, shards: consumers, page: o.page, conc: o.concurrency,
		base: time.Now().Add(-6 * time.Hour)}
	if markers {
		if q.markers, err = cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1}); err != nil {
			return "", err
		}
	}
	log := openLogs()

	fmt.Printf("\n## %s queue, %d consumer(s) on %d shard(s), keyspace %s, load avg %s\n\n", name, consumers, consumers, ks, benchkit.LoadAvg())
	fmt.Printf("poll: %s\n", strings.Join(strings.Fields(fmt.Sprintf(naivePoll, ks)), " "))
	fmt.Printf("LIMIT %d, concurrency %d per consumer, one row delete per processed failure", o.page, o.concurrency)
	if markers {
		fmt.Print(", after the STRICT marker protocol (marker read, IN_PROGRESS, no-op execution, COMMITTED)")
	}
	fmt.Println(".")
	fmt.Println("Tombstones: one traced poll of shard 0 before the segment's drain.")
	fmt.Println()
	fmt.Println("| processed | insert s | drain s | tx/s | polls | polls warned | mean poll ms | tombstones per poll before drain | load avg |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---|")

	processed := 0
	var firstRate, lastRate float64
	firstTomb, lastTomb := -1, 0
	aborted := "no"
	for processed < o.total && ctx.Err() == nil {
		t0 := time.Now()
		if err := q.insert(ctx, o.segment); err != nil {
			return "", err
		}
		insertDur := time.Since(t0)
		tomb, err := q.tracePoll(ctx)
		tombCell := fmt.Sprint(tomb)
		if err != nil {
			tombCell = "aborted: " + short(err)
		}
		st := q.drain(ctx)
		processed += int(st.done)
		rate := float64(st.done) / st.elapsed.Seconds()
		if firstTomb < 0 {
			firstRate, firstTomb = rate, tomb
		}
		lastRate, lastTomb = rate, tomb
		fmt.Printf("| %d | %.1f | %.1f | %.0f | %d | %d | %.1f | %s | %s |\n", processed, insertDur.Seconds(), st.elapsed.Seconds(),
			rate, st.polls, st.warned, st.meanPoll(), tombCell, benchkit.LoadAvg())
		if st.err != nil {
			reason := short(st.err)
			if strings.Contains(reason, "READ_TOO_MANY_TOMBSTONES") {
				reason = "READ_TOO_MANY_TOMBSTONES"
			}
			aborted = fmt.Sprintf("yes, after %d processed: %s", processed, reason)
			fmt.Printf("\nThe drain stopped after %d processed failures: %v\n", processed, st.err)
			break
		}
	}
	warn, abort, firstAbort := log.count(ks)
	printHistograms(ctx, s, ks)
	fmt.Printf("\nTombstone log lines naming %s: %d warnings, %d aborts.\n", ks, warn, abort)
	if firstAbort != "" {
		fmt.Printf("First abort in the log:\n\n    %s\n", firstAbort)
	}
	return fmt.Sprintf("| %s | %d | %d | %.0f | %.0f | %d → %d (one poll) | %d | %s |",
		name, consumers, processed, firstRate, lastRate, firstTomb, lastTomb, warn, aborted), nil
}

func short(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// insert writes n due rows, spread over the shards, in unlogged batches of one partition each.
func (q *naiveQueue) insert(ctx context.Context, n int) error {
	stmt := fmt.Sprintf(naiveInsert, q.ks)
	perShard := make([][][]any, q.shards)
	for range n {
		shard := q.seq % q.shards
		at := q.base.Add(time.Duration(q.seq) * 10 * time.Millisecond)
		perShard[shard] = append(perShard[shard], []any{shard, at, fmt.Sprintf("tx-%08d", q.seq), "k", "Payment", 0})
		q.seq++
	}
	for _, rows := range perShard {
		for len(rows) > 0 {
			k := min(len(rows), 100)
			b := q.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
			for _, r := range rows[:k] {
				b.Query(stmt, r...)
			}
			if err := q.s.ExecuteBatch(b); err != nil {
				return fmt.Errorf("naive insert: %w", err)
			}
			rows = rows[k:]
		}
	}
	return nil
}

// tracePoll runs one poll of shard 0 with tracing and returns the tombstones it scanned.
func (q *naiveQueue) tracePoll(ctx context.Context) (int, error) {
	rs, err := cassandra.TraceQuery(ctx, q.s, fmt.Sprintf(naivePoll, q.ks), 0, time.Now(), q.page)
	if err != nil {
		return 0, err
	}
	return rs.Tombstones, nil
}

type drainStats struct {
	done, polls, warned int64
	pollTime            time.Duration // summed over polls
	elapsed             time.Duration
	err                 error
}

func (d drainStats) meanPoll() float64 {
	return float64(d.pollTime) / float64(time.Millisecond) / float64(max(d.polls, 1))
}

// drain runs one consumer per shard until every shard has no due row, or a poll fails.
func (q *naiveQueue) drain(ctx context.Context) drainStats {
	start := time.Now()
	var st drainStats
	var done, polls, warned, pollNanos atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for shard := range q.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.consume(ctx, shard, &done, &polls, &warned, &pollNanos); err != nil {
				mu.Lock()
				st.err = errors.Join(st.err, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st.done, st.polls, st.warned, st.elapsed = done.Load(), polls.Load(), warned.Load(), time.Since(start)
	st.pollTime = time.Duration(pollNanos.Load())
	return st
}

type naiveRow struct {
	at   time.Time
	id   string
	impl string
}

func (q *naiveQueue) consume(ctx context.Context, shard int, done, polls, warned, pollNanos *atomic.Int64) error {
	poll, del := fmt.Sprintf(naivePoll, q.ks), fmt.Sprintf(naiveDelete, q.ks)
	sem := make(chan struct{}, q.conc)
	for ctx.Err() == nil {
		t0 := time.Now()
		iter := q.s.Query(poll, shard, t0, q.page).WithContext(ctx).Iter()
		pollNanos.Add(int64(time.Since(t0)))
		polls.Add(1)
		if len(iter.Warnings()) > 0 { // read before Close, which drops them
			warned.Add(1)
		}
		var rows []naiveRow
		var r naiveRow
		var alloc string
		var attempt int
		for iter.Scan(&r.at, &r.id, &alloc, &r.impl, &attempt) {
			rows = append(rows, r)
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("%w: poll of shard %d: %w", errAborted, shard, err)
		}
		if len(rows) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for _, r := range rows {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				// The no-op execution (inside the marker protocol with markers), then the row
				// delete that leaves a tombstone.
				if err := q.execute(ctx, r); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				if err := q.s.Query(del, shard, r.at, r.id).WithContext(ctx).Idempotent(true).Exec(); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
			}()
		}
		wg.Wait()
		if p := failed.Load(); p != nil {
			return fmt.Errorf("delete in shard %d: %w", shard, *p)
		}
	}
	return ctx.Err()
}

// execute is the no-op execution; with markers, wrapped in the worker's STRICT protocol.
func (q *naiveQueue) execute(ctx context.Context, r naiveRow) error {
	if q.markers == nil {
		return nil
	}
	m, found, err := q.markers.Marker(ctx, r.id, r.impl)
	if err != nil {
		return err
	}
	if found && m.State == cassandra.MarkerCommitted {
		return nil
	}
	owner := benchkit.WorkerID(0)
	if err := q.markers.MarkInProgress(ctx, r.id, r.impl, owner, time.Now(), 20*time.Second); err != nil {
		return err
	}
	return q.markers.MarkCommitted(ctx, r.id, r.impl, owner, time.Now(), cassandra.DefaultMarkerRetention)
}
