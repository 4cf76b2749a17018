package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
)

// bucketRun is one bucket being streamed and executed. Rows are dispatched page by page, each
// into a slot of the worker's semaphore, so memory holds one page and the executions in flight,
// never a whole bucket.
type bucketRun struct {
	key   cassandra.BucketKey
	token int64
	// readFrom is the write clock's reading before the bucket's first page was read: the
	// partition delete is stamped from it, so that a row written into the bucket after that
	// read, even into a page already read, survives the delete and is read by a later pass.
	readFrom time.Time

	wg       sync.WaitGroup
	seen     atomic.Int64 // rows dispatched
	finished atomic.Int64 // rows done, dead-lettered or recorded again
	stop     atomic.Bool  // a row was refused by the guard: dispatch no more
	complete bool         // every page was read and every row dispatched
	rowErr   atomic.Pointer[error]
	// expiring: a row was finished by a marker with less than carryMargin left. Kept any
	// longer, the bucket could outlive that marker and run the row again: see carry.
	expiring atomic.Bool
	// sweep: the ring is paused and the bucket is read only to check its rows' markers (sweepRow).
	sweep bool

	mu   sync.Mutex
	held map[string]int // why rows (or pages) were left, by keptReason
}

// hold records why a row or a page of the bucket was left unfinished.
func (r *bucketRun) hold(err error) {
	why := keptReason(err)
	r.mu.Lock()
	if r.held == nil {
		r.held = map[string]int{}
	}
	r.held[why]++
	r.mu.Unlock()
}

// why says why the bucket is kept: the reasons its rows were left, the commonest first, each with
// its count ("breaker open ×12, paused ×3").
func (r *bucketRun) why() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reasons := make([]string, 0, len(r.held))
	for why := range r.held {
		reasons = append(reasons, why)
	}
	sort.Slice(reasons, func(i, j int) bool {
		a, b := reasons[i], reasons[j]
		return r.held[a] > r.held[b] || r.held[a] == r.held[b] && a < b
	})
	parts := make([]string, len(reasons))
	for i, why := range reasons {
		parts[i] = fmt.Sprintf("%s ×%d", why, r.held[why])
	}
	return strings.Join(parts, ", ")
}

// reasons are the names of why's reasons, without their counts, sorted: what keptLog compares.
func (r *bucketRun) reasons() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.held))
	for why := range r.held {
		names = append(names, why)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// keptLog remembers the reasons each kept bucket was last logged with. A bucket kept pass after
// pass (an open breaker, a pause of its step, a marker held elsewhere) is logged at info when its
// reasons change and at debug otherwise: an outage must not write a line per bucket per pass.
type keptLog struct {
	mu   sync.Mutex
	said map[cassandra.BucketKey]string
}

// maxKeptLog bounds keptLog's memory; past it, every kept bucket is said again once.
const maxKeptLog = 10_000

// changed records reasons for key and reports whether they differ from the last ones.
func (k *keptLog) changed(key cassandra.BucketKey, reasons string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if last, ok := k.said[key]; ok && last == reasons {
		return false
	}
	if k.said == nil || len(k.said) >= maxKeptLog {
		k.said = map[cassandra.BucketKey]string{}
	}
	k.said[key] = reasons
	return true
}

// forget drops a bucket that is gone.
func (k *keptLog) forget(key cassandra.BucketKey) {
	k.mu.Lock()
	delete(k.said, key)
	k.mu.Unlock()
}

// heldError leaves a row unfinished on purpose, for a reason that is not a failure: its bucket is
// kept and a later pass takes the row up again, no attempt used.
type heldError struct{ why string }

func (e heldError) Error() string { return "row held: " + e.why }

// Why rows are held.
var (
	// errRingPaused: the operator paused the whole ring; it also ends the traversal.
	errRingPaused = heldError{"paused"}
	// errImplPaused: the operator paused executions of the row's impl type.
	errImplPaused = heldError{"impl paused"}
	// errBreakerOpen: the breaker of the row's impl type is open (or all its probes are out).
	errBreakerOpen = heldError{"breaker open"}
	// errElsewhere: another worker's IN_PROGRESS marker on the step is alive.
	errElsewhere = heldError{"in progress elsewhere"}
	// errBusyHere: this worker runs the same step from another bucket right now.
	errBusyHere = heldError{"running from another bucket"}
	// errNotSent: the executor did not send the call (its deadline had passed).
	errNotSent = heldError{"call not sent"}
)

// keptReason names why err left a row or a page unfinished, for the "bucket kept" line.
func keptReason(err error) string {
	var h heldError
	switch {
	case errors.As(err, &h):
		return h.why
	case lease.IsGuardError(err):
		return "guard refusal"
	case errors.Is(err, ErrStopped):
		return "worker stopping"
	case err == nil:
		return "unfinished"
	default:
		return "failed query"
	}
}

// streamBucket reads the bucket page by page and dispatches every row. It returns when every
// row is dispatched (not finished) or when it stopped early; finish waits for the rows.
//
// In a pause sweep (sweep) each row is only checked against its marker (sweepRow), never executed.
func (s *Scanner) streamBucket(ctx context.Context, key cassandra.BucketKey, token int64, sweep bool) (*bucketRun, error) {
	run := &bucketRun{key: key, token: token, sweep: sweep, readFrom: s.cfg.WriteClock.Now()}
	row := s.runRow
	if sweep {
		row = s.sweepRow
	}
	var state []byte
	for page := 0; page == 0 || state != nil; page++ {
		if run.stop.Load() {
			return run, *run.rowErr.Load()
		}
		var rows []cassandra.Transaction
		var next []byte
		err := s.onToken(ctx, token, func(ctx context.Context) (err error) {
			rows, next, err = s.store.ReadBucketPage(ctx, key, state)
			return err
		})
		if err != nil {
			run.hold(err)
			return run, err
		}
		for _, t := range rows {
			if run.stop.Load() {
				return run, *run.rowErr.Load()
			}
			select {
			case s.sem <- struct{}{}: // page-level backpressure: wait for a free execution slot
			case <-ctx.Done():
				err := errors.Join(ErrStopped, ctx.Err())
				run.hold(err)
				return run, err
			}
			run.seen.Add(1)
			run.wg.Add(1)
			go func(t cassandra.Transaction) {
				defer run.wg.Done()
				defer func() { <-s.sem }()
				ok, err := row(ctx, run, t)
				if ok {
					run.finished.Add(1)
					return
				}
				run.hold(err)
				var held heldError
				switch {
				case lease.IsGuardError(err), errors.Is(err, errRingPaused):
					// Nothing more of this bucket can start now: dispatch no more.
					run.rowErr.CompareAndSwap(nil, &err)
					run.stop.Store(true)
				case errors.As(err, &held), errors.Is(err, ErrStopped):
				default:
					s.log.Warn().Err(err).Str("transaction_id", t.ID).Str("instance_id", key.InstanceID).
						Stringer("window", key.Window).Int("bucket", key.Bucket).Msg("row not finished")
				}
			}(t)
		}
		state = next
	}
	run.complete = true
	return run, nil
}

// finish waits for the bucket's rows and, when every row read finished, deletes the bucket
// partition and then its tier-4 row. It reports whether the bucket is gone. A partial bucket
// (stopped, refused, a row that did not finish) is kept whole for a later pass, and so is one
// whose partition delete left rows stamped within max_clock_offset of it (a row written after
// the read, or just before).
func (s *Scanner) finish(ctx context.Context, run *bucketRun) bool {
	run.wg.Wait()
	seen, finished := run.seen.Load(), run.finished.Load()
	k := run.key
	kept := !run.complete || run.stop.Load() || finished != seen
	if kept && run.expiring.Load() {
		kept = !s.carry(context.WithoutCancel(ctx), run)
	}
	if kept {
		s.count(&s.stats.BucketsKept)
		ev := s.log.Debug()
		if s.kept.changed(k, run.reasons()) {
			ev = s.log.Info()
		}
		ev.Str("instance_id", k.InstanceID).Stringer("window", k.Window).Int("bucket", k.Bucket).
			Int64("rows_seen", seen).Int64("rows_finished", finished).Bool("read_whole", run.complete).
			Str("why", run.why()).Msg("bucket kept")
		return false
	}
	ctx = context.WithoutCancel(ctx) // a finished bucket is deleted even while the worker stops
	if err := s.onToken(ctx, run.token, func(ctx context.Context) error {
		return s.store.DeleteBucketPartition(ctx, k, s.deleteTime(run.readFrom))
	}); err != nil {
		s.count(&s.stats.BucketsKept)
		s.log.Warn().Err(err).Str("instance_id", k.InstanceID).Stringer("window", k.Window).Int("bucket", k.Bucket).Msg("bucket not deleted")
		return false
	}
	// Tier 4 goes after tier 5, by a checked delete: a tier-4 row without its partition is
	// harmless (the next pass reads an empty bucket and deletes the row), a partition without its
	// tier-4 row is lost. A row written after the read survived the partition delete: the check
	// sees it, and the tier-4 row stays to lead to it.
	var survivors int
	if err := s.onToken(ctx, run.token, func(ctx context.Context) error {
		checkedAt := s.cfg.WriteClock.Now()
		rows, _, err := s.store.ReadBucketPage(ctx, k, nil)
		if survivors = len(rows); err != nil || survivors > 0 {
			return err
		}
		return s.store.DeleteBucket(ctx, k.Window, k.InstanceID, k.Bucket, s.deleteTime(checkedAt))
	}); err != nil {
		s.count(&s.stats.BucketsKept)
		s.log.Warn().Err(err).Str("instance_id", k.InstanceID).Stringer("window", k.Window).Int("bucket", k.Bucket).Msg("bucket row not deleted")
		return false
	}
	if survivors > 0 {
		s.count(&s.stats.BucketsKept)
		s.log.Info().Str("instance_id", k.InstanceID).Stringer("window", k.Window).Int("bucket", k.Bucket).Int("rows", survivors).
			Msg("bucket kept: rows stamped less than max_clock_offset before its delete survived it (written after it was read, or just before); a later pass reads them again")
		return false
	}
	s.count(&s.stats.BucketsDeleted)
	s.kept.forget(k)
	return true
}

// carryMargin is how long before a finishing marker expires its bucket stops being kept: a day,
// as product.md puts it ("a bucket kept longer than retention − 1 day"), measured on the markers
// themselves, so that an old window that was never kept (an import, a day left behind) runs at
// once, and a kept one is carried whatever its window's age. It is a margin on the markers'
// expiry, fixed rather than a share of the retention because it must cover the worker's own
// delays in seeing the marker (a pause sweep an hour apart, a stopped worker, a long outage of
// Cassandra), which do not shrink with a shorter retention; Config.Validate therefore wants the
// retention above twice the margin, or every kept bucket would be carried on first sight.
const carryMargin = 24 * time.Hour

// carry ends a kept bucket whose handled rows' markers are about to expire: it reads the bucket
// again and records every row no marker finishes into the next window, unchanged (same replay and
// attempt: no call was made, so no attempt is used), then reports whether all of them are copied,
// so that the bucket can be deleted before any of its handled rows could run again. A copy needs
// no new floor: it stands where its row stood among the step's copies, and whichever of the two
// runs first settles the other.
func (s *Scanner) carry(ctx context.Context, run *bucketRun) bool {
	settle := func(ctx context.Context, fn func(ctx context.Context) error) error {
		return s.onToken(ctx, run.token, fn)
	}
	var state []byte
	for page := 0; page == 0 || state != nil; page++ {
		var rows []cassandra.Transaction
		var next []byte
		if err := settle(ctx, func(ctx context.Context) (err error) {
			rows, next, err = s.store.ReadBucketPage(ctx, run.key, state)
			return err
		}); err != nil {
			return false
		}
		for _, t := range rows {
			var m cassandra.Marker
			var found bool
			if err := settle(ctx, func(ctx context.Context) (err error) {
				m, found, err = s.store.Marker(ctx, t.ID, t.ImplType)
				return err
			}); err != nil {
				return false
			}
			if finishedBy(m, found, t) != 0 {
				continue
			}
			target, err := s.copyTo(ctx, run.key, settle, t, time.Duration(s.cfg.WindowMinutes)*time.Minute)
			if err != nil {
				return false
			}
			s.count(&s.stats.Carried)
			s.log.Info().Str("transaction_id", t.ID).Str("instance_id", run.key.InstanceID).Stringer("from", run.key.Window).
				Stringer("window", target).Msg("carried out of a bucket kept until its markers near expiry")
		}
		state = next
	}
	return true
}
