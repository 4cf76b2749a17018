package worker

import (
	"context"
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
// It drives the protocol's pure core (rowState, rowstep.go): it performs each action the core
// answers and feeds the result back as the next event.
//
// Only the wait for a token of the throttle ends with ctx, the worker's run context: a row that
// started runs to its end, each step bounded by its timeout and allowed by the guard, so that a
// stopping worker does not leave markers behind that it could have written.
func (s *Scanner) runRow(runCtx context.Context, run *bucketRun, t cassandra.Transaction) (bool, error) {
	key := txKey{t.ID, t.ImplType}
	if _, dup := s.busy.LoadOrStore(key, struct{}{}); dup {
		// The same step from another bucket (a kept bucket and its re-recorded copy) is running
		// now; leave this copy for a pass that will find its marker.
		s.count(&s.stats.SkippedBusy)
		return false, errBusyHere
	}
	defer s.busy.Delete(key)

	d := &rowDriver{s: s, runCtx: runCtx, ctx: context.WithoutCancel(runCtx), run: run, t: t}
	defer d.close()
	core := newRowState(s.cfg.WorkerID, run.key, t, s.cfg.Policies.For(t.ImplType), s.cfg.WindowMinutes, s.cfg.QueryTimeout)
	var ev rowEvent
	for {
		a := core.next(ev)
		for _, c := range a.counts {
			s.count(s.stats.field(c))
		}
		if a.do == doFinish {
			return d.finish(a)
		}
		ev = d.perform(a)
	}
}

// rowDriver performs the actions of one row's protocol.
type rowDriver struct {
	s      *Scanner
	runCtx context.Context // ends the wait for a throttle token only
	ctx    context.Context // every other step's: runCtx without its cancellation
	run    *bucketRun
	t      cassandra.Transaction

	admitted bool          // by doAdmit: ticket and the in-flight registration are the row's
	ticket   breakerTicket // abandoned on the way out unless settled
	settled  bool
	end      func() // of the in-flight registration
	// copyCtx bounds the writes of a copy, from the first one on, by its target window's start.
	copyCtx    context.Context
	copyCancel context.CancelFunc
}

// perform does a, which is not doFinish, and reports its result.
func (d *rowDriver) perform(a rowAction) rowEvent {
	s, t, token := d.s, d.t, d.run.token
	switch a.do {
	case doReadMarker:
		var ev rowEvent
		ev.lease, ev.err = s.onRow(d.ctx, token, s.cfg.QueryTimeout, a.guard, func(ctx context.Context, _ lease.Lease) (err error) {
			ev.marker, ev.found, err = s.store.Marker(ctx, t.ID, t.ImplType)
			return err
		})
		return ev
	case doAdmit:
		ticket, err := s.admit(d.runCtx, t.ImplType)
		if err != nil {
			return rowEvent{err: err}
		}
		// From here Drain waits for the whole protocol, not one step: a call that starts is
		// marked, made and settled before its token goes. Not before: a row waiting for a
		// throttle token would hold a rebalance for as long as the wait, and then fail the epoch
		// check anyway. The marker read registered itself (s.run), and every step after this
		// one asks the guard after this registration.
		d.admitted, d.ticket, d.end = true, ticket, s.inflight.begin(tokenScope(token))
		return rowEvent{}
	case doMarkInProgress:
		_, err := s.onRow(d.ctx, token, s.cfg.QueryTimeout, a.guard, func(ctx context.Context, _ lease.Lease) error {
			return s.store.MarkInProgress(ctx, t.ID, t.ImplType, s.cfg.WorkerID, s.now(), s.cfg.ExecTimeout+s.cfg.MarkerMargin)
		})
		return rowEvent{err: err}
	case doExecute:
		var ev rowEvent
		ev.lease, ev.err = s.onRow(d.ctx, token, s.cfg.ExecTimeout, a.guard, func(ctx context.Context, l lease.Lease) error {
			ev.out = s.execute(ctx, s.task(d.run.key, t, l.Epoch))
			return nil
		})
		return ev
	case doSettleBreaker:
		now := s.now()
		s.breakers.settle(d.ticket, a.transient, now)
		d.settled = true
		return rowEvent{now: now}
	case doWrite:
		ctx := d.ctx
		if a.write.within > 0 {
			if d.copyCtx == nil {
				d.copyCtx, d.copyCancel = context.WithTimeout(d.ctx, a.write.within)
			}
			ctx = d.copyCtx
		}
		return rowEvent{err: s.settleOn(token, a.guard.held, t.ID)(ctx, s.settlingQuery(t, a.write))}
	}
	panic(fmt.Sprintf("worker: no driver for row action %d", a.do))
}

// settlingQuery is the query of w, a write that settles t (or, for carry, a write of t's copy).
func (s *Scanner) settlingQuery(t cassandra.Transaction, w rowWrite) func(ctx context.Context) error {
	to := w.target
	return func(ctx context.Context) error {
		switch w.kind {
		case writeCommitted:
			return s.store.MarkCommitted(ctx, t.ID, t.ImplType, s.cfg.WorkerID, s.now(), s.cfg.MarkerRetention)
		case writeDay:
			return s.store.InsertDay(ctx, to.Window.Day)
		case writeWindow:
			return s.store.InsertWindow(ctx, to.Window)
		case writeInstance:
			return s.store.InsertInstance(ctx, to.Window, to.InstanceID)
		case writeBucket:
			return s.store.InsertBucket(ctx, to.Window, to.InstanceID, to.Bucket)
		case writeTransaction:
			return s.store.InsertTransaction(ctx, to, w.row)
		case writeFloor:
			return s.store.SetFloor(ctx, t.ID, t.ImplType, w.floor, s.cfg.MarkerRetention)
		case writeDeadLetter:
			return s.store.InsertDeadLetter(ctx, w.dead)
		case writeDeadLettered:
			return s.store.MarkDeadLettered(ctx, t.ID, t.ImplType, s.cfg.WorkerID, s.now(), s.cfg.MarkerRetention)
		}
		panic(fmt.Sprintf("worker: no query for row write %d", w.kind))
	}
}

// finish ends the row as a says.
func (d *rowDriver) finish(a rowAction) (bool, error) {
	s, t := d.s, d.t
	if a.expiring {
		d.run.expiring.Store(true)
	}
	switch a.line {
	case lineRerecorded:
		s.log.Debug().Str("transaction_id", t.ID).Str("instance_id", d.run.key.InstanceID).
			Stringer("window", a.write.target.Window).Int("attempt", a.write.row.Attempt).Msg("recorded again")
	case lineDeadLettered:
		dl := a.write.dead
		s.log.Info().Str("transaction_id", t.ID).Str("instance_id", d.run.key.InstanceID).Int("attempts", dl.Transaction.Attempt).
			Int("last_status", dl.LastStatus).Str("last_error", dl.LastError).Msg("dead-lettered")
	}
	return a.finished, a.err
}

// close gives back what the row held: the breaker's ticket of a call that never settled it, the
// in-flight registration, the copy's deadline.
func (d *rowDriver) close() {
	if d.admitted {
		if !d.settled {
			d.s.breakers.abandon(d.ticket)
		}
		d.end()
	}
	if d.copyCancel != nil {
		d.copyCancel()
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

// copyTo writes row under b's instance id into the window at least delay ahead (copyTarget),
// each write allowed by settle on the instance's token (it is the same instance, so the same
// token), all of them bounded by the target window's start.
func (s *Scanner) copyTo(ctx context.Context, b cassandra.BucketKey, settle settleFunc, row cassandra.Transaction, delay time.Duration) (window.Window, error) {
	target, within, err := copyTarget(s.now(), s.cfg.WindowMinutes, delay, s.cfg.QueryTimeout)
	if err != nil {
		return window.Window{}, s.failed(err)
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	to := cassandra.BucketKey{Window: target, InstanceID: b.InstanceID, Bucket: 0}
	for _, w := range copyWrites(to, row, within) {
		if err := settle(ctx, s.settlingQuery(row, w)); err != nil {
			return window.Window{}, err
		}
	}
	return target, nil
}

// onRow is the one guarded call of the row protocol: fn on the row's token, allowed by the guard's
// check of the token as g decides on it (rowGuard.allow). It returns the lease fn ran under.
func (s *Scanner) onRow(ctx context.Context, token int64, need time.Duration, g rowGuard,
	fn func(ctx context.Context, l lease.Lease) error) (lease.Lease, error) {
	var ran lease.Lease
	err := s.run(ctx, tokenScope(token), need,
		func(need time.Duration) (lease.Lease, error) {
			l, err := s.guard.CheckToken(token, need)
			return g.allow(token, l, err, need, s.now)
		},
		func(ctx context.Context, l lease.Lease) error {
			ran = l
			return fn(ctx, l)
		})
	return ran, err
}

// settleFunc runs one of the writes that settle an executed row (its COMMITTED marker, its dead
// letter, its re-recording).
type settleFunc func(ctx context.Context, fn func(ctx context.Context) error) error

// settleOn runs the writes that settle a row executed under held, each under settleGuard(held),
// tried again up to settleTries times while settleRetriable.
func (s *Scanner) settleOn(token int64, held lease.Lease, transactionID string) settleFunc {
	g := settleGuard(held)
	return func(ctx context.Context, fn func(ctx context.Context) error) (err error) {
		for try := 1; ; try++ {
			_, err = s.onRow(ctx, token, s.cfg.QueryTimeout, g, func(ctx context.Context, _ lease.Lease) error { return fn(ctx) })
			if err == nil || try == settleTries || !settleRetriable(err) {
				return err
			}
			s.log.Info().Err(err).Str("transaction_id", transactionID).Int("try", try).
				Msg("a write settling an executed row failed; trying it again")
		}
	}
}

// field is the counter c names.
func (st *Stats) field(c rowCount) *uint64 {
	switch c {
	case countSkippedCommitted:
		return &st.SkippedCommitted
	case countSkippedSuperseded:
		return &st.SkippedSuperseded
	case countSkippedDeadLettered:
		return &st.SkippedDeadLettered
	case countSkippedInProgress:
		return &st.SkippedInProgress
	case countNotSent:
		return &st.NotSent
	case countExecuted:
		return &st.Executed
	case countDone:
		return &st.Done
	case countTransient:
		return &st.Transient
	case countPermanent:
		return &st.Permanent
	case countCommitted:
		return &st.Committed
	case countRerecorded:
		return &st.Rerecorded
	case countDeadLettered:
		return &st.DeadLettered
	case countErrors:
		return &st.Errors
	}
	panic(fmt.Sprintf("worker: no counter %d", c))
}
