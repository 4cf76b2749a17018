package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// runRow takes one Tier 5 row through the STRICT marker protocol and reports whether it
// finished: done (or already COMMITTED), superseded (its marker's floor says a newer copy of the
// step exists, or it was dead-lettered before floors were written), recorded again into a later
// window, or dead-lettered.
// Anything else (a refusal, a failed query) leaves the row unfinished, so its bucket is kept and
// a later pass sees the row again.
//
// Only the wait for a token of the throttle ends with ctx, the worker's run context: a row that
// started runs to its end, each step bounded by its timeout and allowed by the guard, so that a
// stopping worker does not leave markers behind that it could have written.
func (s *Scanner) runRow(runCtx context.Context, run *bucketRun, t cassandra.Transaction) (bool, error) {
	ctx := context.WithoutCancel(runCtx)
	b, token := run.key, run.token
	key := txKey{t.ID, t.ImplType}
	if _, dup := s.busy.LoadOrStore(key, struct{}{}); dup {
		// The same step from another bucket (a kept bucket and its re-recorded copy) is running
		// now; leave this copy for a pass that will find its marker.
		s.count(&s.stats.SkippedBusy)
		return false, errBusyHere
	}
	defer s.busy.Delete(key)

	span := t.ImplType
	var m cassandra.Marker
	var found bool
	var epoch uint64 // of the lease the marker was read under
	err := s.run(ctx, tokenScope(token), s.cfg.QueryTimeout,
		func(need time.Duration) (lease.Lease, error) {
			l, err := s.guard.CheckToken(token, need)
			epoch = l.Epoch
			return l, err
		},
		func(ctx context.Context, _ lease.Lease) (err error) {
			m, found, err = s.store.Marker(ctx, t.ID, span)
			return err
		})
	if err != nil {
		return false, err
	}
	if field := s.finishedBy(m, found, t); field != nil {
		s.count(field)
		if m.Expiring(t.Copy(), carryMargin) {
			run.expiring.Store(true)
		}
		return true, nil
	}
	switch {
	case found && m.InProgressOwner != "" && m.InProgressOwner != s.cfg.WorkerID:
		// Another worker started this step less than its execution timeout plus MarkerMargin ago
		// (the IN_PROGRESS cells' TTL), and nothing finishes the row: no COMMITTED, no floor past
		// it, no DEAD_LETTERED before floors. Token leases keep one instance's rows to one worker,
		// so this is either the same step recorded under two instances, which may be running right
		// now, or the marker of a worker that died mid-call, which expires soon. Leave the row for
		// a pass after the marker turned COMMITTED or expired.
		s.count(&s.stats.SkippedInProgress)
		return false, errElsewhere
	}
	// No marker, or our own IN_PROGRESS from a call whose outcome was never marked: execute (the
	// executor's idempotency key covers a call that did reach the downstream service), once the
	// controls and the breaker let it start.
	ticket, err := s.admit(runCtx, t.ImplType)
	if err != nil {
		return false, err
	}
	// From here Drain waits for the whole protocol, not one step: a call that starts is marked,
	// made and settled before its token goes. Not before: a row waiting for a throttle token
	// would hold a rebalance for as long as the wait, and then fail the epoch check anyway. The
	// marker read above registered itself (s.run), and every step below asks the guard after
	// this registration.
	end := s.inflight.begin(tokenScope(token))
	defer end()
	settled := false
	defer func() {
		if !settled {
			s.breakers.abandon(ticket)
		}
	}()
	// The marker was read under epoch; the row may have waited long for its token since. A new
	// epoch means the assignment changed meanwhile: the token may have been another worker's in
	// between, and the marker read may be stale, so the row is left for a pass that reads it again.
	onEpoch := func(need time.Duration) (lease.Lease, error) {
		l, err := s.guard.CheckToken(token, need)
		if err == nil && l.Epoch != epoch {
			return lease.Lease{}, fmt.Errorf("%w: epoch %d since the marker was read under %d", lease.ErrTokenNotLeased, l.Epoch, epoch)
		}
		return l, err
	}
	err = s.run(ctx, tokenScope(token), s.cfg.QueryTimeout, onEpoch, func(ctx context.Context, _ lease.Lease) error {
		return s.store.MarkInProgress(ctx, t.ID, span, s.cfg.WorkerID, s.now(), s.cfg.ExecTimeout+s.cfg.MarkerMargin)
	})
	if err != nil {
		return false, err
	}

	var out Outcome
	var held lease.Lease // the lease the execution ran under
	err = s.run(ctx, tokenScope(token), s.cfg.ExecTimeout, onEpoch,
		func(ctx context.Context, l lease.Lease) error {
			held = l
			out = s.execute(ctx, s.task(b, t, l.Epoch))
			return nil
		})
	if err != nil {
		return false, err
	}
	if out.Kind == NotSent {
		// The call never left: no outcome, no attempt used. The row stays unfinished, so its
		// bucket is kept and a later pass (under a fresh lease) executes it.
		s.count(&s.stats.NotSent)
		return false, errNotSent
	}
	s.count(&s.stats.Executed)
	s.breakers.settle(ticket, out.Kind == Transient, s.now())
	settled = true

	settle := s.settleOn(token, held, t.ID)
	switch out.Kind {
	case Done:
		s.count(&s.stats.Done)
		err := settle(ctx, func(ctx context.Context) error {
			return s.store.MarkCommitted(ctx, t.ID, span, s.cfg.WorkerID, s.now(), s.cfg.MarkerRetention)
		})
		if err != nil {
			// The step ran but is not marked: the row stays, and the next pass executes it again
			// under the same idempotency key.
			return false, err
		}
		s.count(&s.stats.Committed)
		return true, nil
	case Permanent:
		s.count(&s.stats.Permanent)
		return s.deadLetter(ctx, b, settle, t, out)
	default:
		s.count(&s.stats.Transient)
		p := s.cfg.Policies.For(t.ImplType)
		if t.Attempt+1 >= p.MaxAttempts {
			return s.deadLetter(ctx, b, settle, t, out)
		}
		return s.rerecord(ctx, b, settle, t, p.WithRetryAfter(p.Delay(s.cfg.WindowMinutes, t.Attempt, t.ID), out.RetryAfter))
	}
}

// admit lets one execution of impl start, or says why not: the ring or impl is paused, impl's
// breaker is open, this worker has no share of the ring's rate. It waits for a token of the
// throttle, and looks at the pause again after the wait, which may be long. The ticket must be
// settled or abandoned.
func (s *Scanner) admit(ctx context.Context, impl string) (breakerTicket, error) {
	if err := s.pausedFor(impl); err != nil {
		return breakerTicket{}, err
	}
	ticket, ok := s.breakers.admit(impl, s.now())
	if !ok {
		s.count(&s.stats.BreakerRefused)
		return ticket, errBreakerOpen
	}
	err := s.waitToken(ctx)
	if err == nil {
		err = s.pausedFor(impl)
	}
	if err != nil {
		s.breakers.abandon(ticket)
		return ticket, err
	}
	return ticket, nil
}

// pausedFor says whether the controls of the lease in force pause impl's executions.
func (s *Scanner) pausedFor(impl string) error {
	c := s.controls()
	switch {
	case c != nil && c.Paused:
		s.count(&s.stats.HeldPaused)
		return errRingPaused
	case c.ImplPaused(impl):
		s.count(&s.stats.HeldPaused)
		return errImplPaused
	}
	return nil
}

// finishedBy reports the counter of the reason the marker finishes a row at t without a call, or
// nil when it does not. It reads the marker in the order COMMITTED, floor, DEAD_LETTERED: each
// lives in cells of its own, so a COMMITTED finishes the row whatever a stalled or duplicate copy
// wrote after it (invariant 7), and an IN_PROGRESS never hides any of them.
func (s *Scanner) finishedBy(m cassandra.Marker, found bool, t cassandra.Transaction) *uint64 {
	switch {
	case !found:
		return nil
	case m.Committed():
		return &s.stats.SkippedCommitted
	case m.Superseded(t.Copy()):
		// A newer copy of the step exists (this row was recorded again, or given up on): it
		// runs at the window its backoff chose, and this one never again (invariant 9).
		return &s.stats.SkippedSuperseded
	case !m.HasFloor && m.State == cassandra.MarkerDeadLettered:
		// Given up on before floors were written: executing a copy again would only repeat a
		// call the downstream refused for good or a step that ran out of attempts.
		return &s.stats.SkippedDeadLettered
	default:
		return nil
	}
}

// execute calls the executor; a panic becomes a transient failure.
func (s *Scanner) execute(ctx context.Context, task Task) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			s.count(&s.stats.Errors)
			s.log.Error().Str("transaction_id", task.TransactionID).Interface("panic", r).Msg("executor panicked")
			out = Outcome{Kind: Transient, Err: fmt.Errorf("worker: executor panicked: %v", r)}
		}
	}()
	out = s.exec.Execute(ctx, task)
	switch out.Kind {
	case Done, Transient, Permanent, NotSent:
	default:
		out = Outcome{Kind: Transient, Status: out.Status, Err: fmt.Errorf("worker: executor returned no outcome (%v): %w", out.Kind, out.Err)}
	}
	return out
}

func (s *Scanner) task(b cassandra.BucketKey, t cassandra.Transaction, epoch uint64) Task {
	return Task{
		TransactionID: t.ID,
		ServiceName:   s.cfg.Service,
		Region:        s.cfg.Region,
		Cluster:       s.cfg.Cluster,
		InstanceID:    b.InstanceID,
		AllocationKey: t.AllocationKey,
		ImplType:      t.ImplType,
		Attempt:       t.Attempt,
		Replay:        t.Replay,
		AddedAt:       t.AddedAt,
		Window:        b.Window,
		WorkerID:      s.cfg.WorkerID,
		LeaseEpoch:    epoch,
	}
}

// rerecordSteps is the number of writes of a re-recording (tiers 1 to 5).
const rerecordSteps = 5

// rerecord writes t again, attempt+1, under its own instance id into the window delay ahead (the
// step's policy: L × 2^attempt capped, jittered by (transaction, attempt), no earlier than the
// downstream's Retry-After), then raises the step's floor to the copy, so that no pass executes t again, however long its
// bucket is kept (invariant 9). Only when the copy and its floor are written is the row finished.
// A crash between the two, or a floor write that failed all its tries (settleOn's retries), leaves
// t unfinished with no floor: a later pass executes it once more and writes a copy at attempt+1
// again, under the same instance but into the window delay ahead of that pass's now, which may
// be another window than the first copy's: one extra copy, executed at most once more, the
// exception invariant 9 allows.
func (s *Scanner) rerecord(ctx context.Context, b cassandra.BucketKey, settle settleFunc, t cassandra.Transaction, delay time.Duration) (bool, error) {
	next := t
	next.Attempt = t.Attempt + 1
	target, err := s.copyTo(ctx, b, settle, next, delay)
	if err != nil {
		return false, err
	}
	err = settle(ctx, func(ctx context.Context) error {
		return s.store.SetFloor(ctx, t.ID, t.ImplType, next.Copy(), s.cfg.MarkerRetention)
	})
	if err != nil {
		return false, err
	}
	s.count(&s.stats.Rerecorded)
	s.log.Debug().Str("transaction_id", t.ID).Str("instance_id", b.InstanceID).
		Stringer("window", target).Int("attempt", next.Attempt).Msg("recorded again")
	return true, nil
}

// copyTo writes row under b's instance id into the window at least delay ahead, tier 1 first and
// tier 5 last, each write allowed by settle on the instance's token (it is the same instance, so
// the same token).
//
// Every write must be acknowledged before the target window starts: a reader opens it
// max_clock_offset later, and a write still in flight then could land in a bucket that reader
// already read and is about to delete. So a target that starts too soon for five query timeouts
// is pushed to a later window, and the writes are bounded by its start. A write that misses the
// deadline leaves the row unfinished (the source bucket is kept); the directory rows already
// written lead to nothing and are compacted like any empty ones.
func (s *Scanner) copyTo(ctx context.Context, b cassandra.BucketKey, settle settleFunc, row cassandra.Transaction, delay time.Duration) (window.Window, error) {
	now := s.now()
	target, err := window.Ahead(now, s.cfg.WindowMinutes, delay)
	if err != nil {
		return window.Window{}, s.failed(err)
	}
	for target.Start().Sub(now) < rerecordSteps*s.cfg.QueryTimeout {
		target = target.Next()
	}
	ctx, cancel := context.WithTimeout(ctx, target.Start().Sub(now))
	defer cancel()

	to := cassandra.BucketKey{Window: target, InstanceID: b.InstanceID, Bucket: 0}
	steps := [rerecordSteps]func(ctx context.Context) error{
		func(ctx context.Context) error { return s.store.InsertDay(ctx, target.Day) },
		func(ctx context.Context) error { return s.store.InsertWindow(ctx, target) },
		func(ctx context.Context) error { return s.store.InsertInstance(ctx, target, b.InstanceID) },
		func(ctx context.Context) error { return s.store.InsertBucket(ctx, target, b.InstanceID, to.Bucket) },
		func(ctx context.Context) error { return s.store.InsertTransaction(ctx, to, row) },
	}
	for _, step := range steps {
		if err := settle(ctx, step); err != nil {
			return window.Window{}, err
		}
	}
	return target, nil
}

// deadLetter gives t up, keeping its metadata, the last outcome, and the attempts made; then
// raises the step's floor past every copy of its replay generation, so that no copy of its row
// runs again, and marks it DEAD_LETTERED for people. The order matters: a floor written before its
// dead letter, followed by a failed dead-letter write, would finish the row on the next pass with
// no record of it anywhere. The other way round, a failed floor write only leaves the row to be
// executed (and dead-lettered, idempotently: one row per step and day) once more. A replay of the
// dead letter records generation+1 at attempt 0: exactly the floor, so the replayed copy runs.
func (s *Scanner) deadLetter(ctx context.Context, b cassandra.BucketKey, settle settleFunc, t cassandra.Transaction, out Outcome) (bool, error) {
	dl := cassandra.DeadLetter{
		Bucket:      b,
		Transaction: t,
		LastStatus:  out.Status,
		DeadAt:      s.now(),
		WorkerID:    s.cfg.WorkerID,
	}
	dl.Transaction.Attempt = t.Attempt + 1 // executions made, this one included
	if out.Err != nil {
		dl.LastError = out.Err.Error()
	}
	writes := []func(ctx context.Context) error{
		func(ctx context.Context) error { return s.store.InsertDeadLetter(ctx, dl) },
		func(ctx context.Context) error {
			return s.store.SetFloor(ctx, t.ID, t.ImplType, cassandra.Copy{Replay: t.Replay + 1}, s.cfg.MarkerRetention)
		},
		func(ctx context.Context) error {
			return s.store.MarkDeadLettered(ctx, t.ID, t.ImplType, s.cfg.WorkerID, s.now(), s.cfg.MarkerRetention)
		},
	}
	for _, w := range writes {
		if err := settle(ctx, w); err != nil {
			return false, err
		}
	}
	s.count(&s.stats.DeadLettered)
	s.log.Info().Str("transaction_id", t.ID).Str("instance_id", b.InstanceID).Int("attempts", dl.Transaction.Attempt).
		Int("last_status", out.Status).Str("last_error", dl.LastError).Msg("dead-lettered")
	return true, nil
}

// settleFunc runs one of the writes that settle an executed row (its COMMITTED marker, its dead
// letter, its re-recording).
type settleFunc func(ctx context.Context, fn func(ctx context.Context) error) error

// settleMargin is what the lease an execution ran under must still have beyond a settling write's
// timeout; the same as the guard's own margin.
const settleMargin = 100 * time.Millisecond

// settleOn guards the writes that settle a row executed under held. The current lease allows them
// when it still covers the token. When it does not (a rebalance took the token away while the call
// ran, or the worker is leaving), the lease the execution ran under still does, as long as it is
// valid for the write's timeout: the coordinator hands the token on only after this worker
// released that epoch or left, which the lease client does only after Drain, and Drain waits for
// this row (runRow registered it in flight); or after the lease expired. Refusing here instead
// would leave an executed step unmarked, and a later pass would execute it again.
func (s *Scanner) settleOn(token int64, held lease.Lease, transactionID string) settleFunc {
	check := func(need time.Duration) (lease.Lease, error) {
		l, err := s.guard.CheckToken(token, need)
		if err == nil || !errors.Is(err, lease.ErrTokenNotLeased) && !errors.Is(err, lease.ErrNoLease) {
			return l, err
		}
		if held.Ranges.Contains(token) && held.Remaining(s.now()) >= need+settleMargin {
			return held, nil
		}
		return lease.Lease{}, err
	}
	return func(ctx context.Context, fn func(ctx context.Context) error) (err error) {
		for try := 1; ; try++ {
			err = s.run(ctx, tokenScope(token), s.cfg.QueryTimeout, check,
				func(ctx context.Context, _ lease.Lease) error { return fn(ctx) })
			if err == nil || try == settleTries || !settleRetriable(err) {
				return err
			}
			s.log.Info().Err(err).Str("transaction_id", transactionID).Int("try", try).
				Msg("a write settling an executed row failed; trying it again")
		}
	}
}

// settleTries is how many times a write that settles an executed row is tried. Giving up after one
// failure throws away an outcome the worker holds in memory: the row stays unfinished, and the next
// pass calls the step again at the same attempt (a repeated attempt, load on a service that may be
// down) or, when the copy was written and its floor was not, leaves one more copy. The commonest
// such failure is a worker stalled for a few seconds (SIGSTOP, a long GC pause, figure 7): its
// driver's timers fire during the stall, so every write it had in flight fails with a timeout when
// it resumes, while its lease still has seconds left. Trying again is safe: every settling write
// is idempotent (a floor never goes down), and each try asks the guard again, so none outlives the
// lease. A write that still fails, or a lease that is gone, leaves the row as a crash would: the
// one extra execution invariant 9 allows.
const settleTries = 3

// settleRetriable reports whether a settling write that failed with err may be tried again: a
// failed query, or a refusal only because the goroutine stalled between the guard's check and the
// write. Not a refusal of the guard itself, nor a context that ended (the copy's window deadline).
func settleRetriable(err error) bool {
	switch {
	case errors.Is(err, errStalled):
		return true
	case lease.IsGuardError(err), errors.Is(err, ErrStopped):
		return false
	default:
		return true
	}
}
