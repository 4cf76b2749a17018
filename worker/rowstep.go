package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// The row protocol's pure core: what one Tier 5 row goes through under its STRICT marker (marker
// read → admit → IN_PROGRESS → execution → settle: COMMITTED, recorded again, or dead-lettered),
// as a step function. rowState.next takes the result of the last action (a rowEvent) and answers
// the next action; it does no I/O, starts no goroutine and reads no clock, so that every path of
// the protocol can be written down as a transcript (testdata/row) and checked in microseconds.
// runRow is its driver: it performs each action (the guard's check, the CQL, the execution) and
// feeds the result back.

// rowDo is what an action asks the driver to do.
type rowDo int

const (
	// doReadMarker reads the step's marker under the guard.
	doReadMarker rowDo = iota + 1
	// doAdmit asks the controls, the breaker and the throttle to let the execution start; once
	// admitted, the driver registers the row in flight until it returns.
	doAdmit
	// doMarkInProgress writes IN_PROGRESS under the guard.
	doMarkInProgress
	// doExecute calls the executor under the guard.
	doExecute
	// doSettleBreaker tells the impl's breaker how the call went, and reports the clock's now.
	doSettleBreaker
	// doWrite runs one of the writes that settle an executed row, under the guard.
	doWrite
	// doFinish ends the row: finished or not, and why.
	doFinish
)

// rowWriteKind names a write that settles an executed row.
type rowWriteKind int

const (
	writeCommitted rowWriteKind = iota + 1
	// The copy of a re-recording, tier 1 first and tier 5 last (copyTo's order).
	writeDay
	writeWindow
	writeInstance
	writeBucket
	writeTransaction
	// writeFloor raises the step's floor to rowWrite.floor.
	writeFloor
	writeDeadLetter
	writeDeadLettered
)

// rowWrite is one settling write and what it writes.
type rowWrite struct {
	kind   rowWriteKind
	target cassandra.BucketKey   // the copy's bucket (its window, instance and bucket 0)
	row    cassandra.Transaction // writeTransaction: the copy, attempt+1
	floor  cassandra.Copy        // writeFloor
	dead   cassandra.DeadLetter  // writeDeadLetter
	// within, for the writes of a copy, is how long they all have from the first one on: until
	// the target window starts (see copyTarget).
	within time.Duration
}

// rowCount names a counter of Stats the protocol bumps.
type rowCount int

const (
	countSkippedCommitted rowCount = iota + 1
	countSkippedSuperseded
	countSkippedDeadLettered
	countSkippedInProgress
	countNotSent
	countExecuted
	countDone
	countTransient
	countPermanent
	countCommitted
	countRerecorded
	countDeadLettered
	countErrors
)

// rowLine names the line the driver logs when the row finishes; 0 is none.
type rowLine int

const (
	lineRerecorded rowLine = iota + 1
	lineDeadLettered
)

// rowAction is the next thing the driver does for a row.
type rowAction struct {
	do     rowDo
	counts []rowCount // bumped before the action is done
	// guard decides whether the current lease allows a guarded action (doReadMarker,
	// doMarkInProgress, doExecute, doWrite).
	guard     rowGuard
	transient bool     // doSettleBreaker: the call failed transiently
	write     rowWrite // doWrite; for doFinish, what the line says

	// doFinish
	finished bool  // the row is finished: its bucket may go
	err      error // why it is not
	expiring bool  // the marker that finished it expires within carryMargin
	line     rowLine
}

// rowEvent is the result of the last action.
type rowEvent struct {
	err    error       // a refusal (the guard's, the controls', the breaker's) or a failure
	lease  lease.Lease // the lease the guarded action ran under
	marker cassandra.Marker
	found  bool
	out    Outcome   // doExecute
	now    time.Time // doSettleBreaker: the clock the breaker was settled at
}

// rowState is one row's way through the protocol.
type rowState struct {
	worker        string
	bucket        cassandra.BucketKey
	row           cassandra.Transaction
	policy        retrypolicy.Policy
	windowMinutes int
	queryTimeout  time.Duration

	last   rowDo  // the action last answered; 0 before the first
	epoch  uint64 // of the lease the marker was read under
	held   lease.Lease
	out    Outcome
	writes []rowWrite // the settling writes still to do
	end    rowAction  // the finish after the last write
}

// newRowState starts row t of bucket b, found by worker under policy.
func newRowState(worker string, b cassandra.BucketKey, t cassandra.Transaction, policy retrypolicy.Policy, windowMinutes int, queryTimeout time.Duration) *rowState {
	return &rowState{worker: worker, bucket: b, row: t, policy: policy, windowMinutes: windowMinutes, queryTimeout: queryTimeout}
}

// next takes the result of the last action (none for the first) and answers the next one. After a
// doFinish it answers the same doFinish again, counting nothing.
func (r *rowState) next(ev rowEvent) rowAction {
	a := r.step(ev)
	r.last = a.do
	if a.do == doFinish {
		r.end = a
	}
	return a
}

func (r *rowState) step(ev rowEvent) rowAction {
	switch {
	case r.last == 0:
		return rowAction{do: doReadMarker}
	case r.last == doFinish:
		again := r.end
		again.counts = nil // counted once
		return again
	case ev.err != nil:
		// Anything refused or failed leaves the row unfinished: its bucket is kept and a later
		// pass sees the row again.
		return finish(ev.err)
	}
	// The marker was read under epoch; the row may have waited long for its token since. A new
	// epoch means the assignment changed meanwhile: the token may have been another worker's in
	// between, and the marker read may be stale, so the row is left for a pass that reads it again.
	sameEpoch := rowGuard{epoch: r.epoch, sameEpoch: true}
	switch r.last {
	case doReadMarker:
		return r.afterMarker(ev)
	case doAdmit:
		return rowAction{do: doMarkInProgress, guard: sameEpoch}
	case doMarkInProgress:
		return rowAction{do: doExecute, guard: sameEpoch}
	case doExecute:
		r.held, r.out = ev.lease, ev.out
		if r.out.Kind == NotSent {
			// The call never left: no outcome, no attempt used. The row stays unfinished, so its
			// bucket is kept and a later pass (under a fresh lease) executes it.
			a := finish(errNotSent)
			a.counts = []rowCount{countNotSent}
			return a
		}
		return rowAction{do: doSettleBreaker, transient: r.out.Kind == Transient, counts: []rowCount{countExecuted}}
	case doSettleBreaker:
		return r.settle(ev.now)
	case doWrite:
		r.writes = r.writes[1:]
		if len(r.writes) == 0 {
			return r.end
		}
		return r.writeNext(nil)
	}
	panic(fmt.Sprintf("worker: row protocol after action %d", r.last))
}

func finish(err error) rowAction { return rowAction{do: doFinish, err: err} }

// afterMarker decides on the marker: it finishes the row, leaves it to another worker, or lets it
// be admitted.
func (r *rowState) afterMarker(ev rowEvent) rowAction {
	r.epoch = ev.lease.Epoch
	if c := finishedBy(ev.marker, ev.found, r.row); c != 0 {
		return rowAction{do: doFinish, finished: true, counts: []rowCount{c},
			expiring: ev.marker.Expiring(r.row.Copy(), carryMargin)}
	}
	if ev.found && ev.marker.InProgressOwner != "" && ev.marker.InProgressOwner != r.worker {
		// Another worker started this step less than its execution timeout plus MarkerMargin ago
		// (the IN_PROGRESS cells' TTL), and nothing finishes the row: no COMMITTED, no floor past
		// it, no DEAD_LETTERED before floors. Token leases keep one instance's rows to one worker,
		// so this is either the same step recorded under two instances, which may be running right
		// now, or the marker of a worker that died mid-call, which expires soon. Leave the row for
		// a pass after the marker turned COMMITTED or expired.
		a := finish(errElsewhere)
		a.counts = []rowCount{countSkippedInProgress}
		return a
	}
	// No marker, or our own IN_PROGRESS from a call whose outcome was never marked: execute (the
	// executor's idempotency key covers a call that did reach the downstream service), once the
	// controls and the breaker let it start.
	return rowAction{do: doAdmit}
}

// settle plans the writes that settle the outcome, now being the clock after the call.
func (r *rowState) settle(now time.Time) rowAction {
	t := r.row
	var first []rowCount
	switch r.out.Kind {
	case Done:
		first = []rowCount{countDone}
		r.writes = []rowWrite{{kind: writeCommitted}}
		r.end = rowAction{do: doFinish, finished: true, counts: []rowCount{countCommitted}}
	case Permanent:
		first = []rowCount{countPermanent}
		r.deadLetter(now)
	default:
		first = []rowCount{countTransient}
		if t.Attempt+1 >= r.policy.MaxAttempts {
			r.deadLetter(now)
			break
		}
		delay := r.policy.WithRetryAfter(r.policy.Delay(r.windowMinutes, t.Attempt, t.ID), r.out.RetryAfter)
		target, within, err := copyTarget(now, r.windowMinutes, delay, r.queryTimeout)
		if err != nil {
			a := finish(err)
			a.counts = append(first, countErrors)
			return a
		}
		r.rerecord(target, within)
	}
	return r.writeNext(first)
}

// writeNext answers the first write left, bumping counts before it.
func (r *rowState) writeNext(counts []rowCount) rowAction {
	return rowAction{do: doWrite, counts: counts, guard: settleGuard(r.held), write: r.writes[0]}
}

// rerecord plans t's copy at attempt+1 under its own instance id into target, tier 1 first and
// tier 5 last, then the step's floor raised to the copy, so that no pass executes t again, however
// long its bucket is kept (invariant 9). Only when the copy and its floor are written is the row
// finished. A crash between the two, or a floor write that failed all its tries (settleOn's
// retries), leaves t unfinished with no floor: a later pass executes it once more and writes a
// copy at attempt+1 again, under the same instance but into the window delay ahead of that pass's
// now, which may be another window than the first copy's: one extra copy, executed at most once
// more, the exception invariant 9 allows.
func (r *rowState) rerecord(target window.Window, within time.Duration) {
	next := r.row
	next.Attempt++
	to := cassandra.BucketKey{Window: target, InstanceID: r.bucket.InstanceID, Bucket: 0}
	r.writes = append(copyWrites(to, next, within), rowWrite{kind: writeFloor, floor: next.Copy()})
	r.end = rowAction{do: doFinish, finished: true, counts: []rowCount{countRerecorded}, line: lineRerecorded,
		write: rowWrite{target: to, row: next}}
}

// copyTarget is the window a copy delay ahead of now goes to, and how long its writes have.
//
// Every write must be acknowledged before the target window starts: a reader opens it
// max_clock_offset later, and a write still in flight then could land in a bucket that reader
// already read and is about to delete. So a target that starts too soon for five query timeouts
// is pushed to a later window, and the writes are bounded by its start. A write that misses the
// deadline leaves the row unfinished (the source bucket is kept); the directory rows already
// written lead to nothing and are compacted like any empty ones.
func copyTarget(now time.Time, windowMinutes int, delay, queryTimeout time.Duration) (window.Window, time.Duration, error) {
	target, err := window.Ahead(now, windowMinutes, delay)
	if err != nil {
		return window.Window{}, 0, err
	}
	for target.Start().Sub(now) < rerecordSteps*queryTimeout {
		target = target.Next()
	}
	return target, target.Start().Sub(now), nil
}

// copyWrites are the writes of row's copy into to, tier 1 first and tier 5 last, so that a crash
// never leaves a row its directory does not lead to; they have within from the first one on.
func copyWrites(to cassandra.BucketKey, row cassandra.Transaction, within time.Duration) []rowWrite {
	w := func(k rowWriteKind) rowWrite { return rowWrite{kind: k, target: to, row: row, within: within} }
	return []rowWrite{w(writeDay), w(writeWindow), w(writeInstance), w(writeBucket), w(writeTransaction)}
}

// rerecordSteps is the number of writes of a copy (tiers 1 to 5).
const rerecordSteps = 5

// deadLetter plans giving t up, keeping its metadata, the last outcome, and the attempts made;
// then raising the step's floor past every copy of its replay generation, so that no copy of its
// row runs again, and marking it DEAD_LETTERED for people. The order matters: a floor written
// before its dead letter, followed by a failed dead-letter write, would finish the row on the next
// pass with no record of it anywhere. The other way round, a failed floor write only leaves the
// row to be executed (and dead-lettered, idempotently: one row per step and day) once more. A
// replay of the dead letter records generation+1 at attempt 0: exactly the floor, so the replayed
// copy runs.
func (r *rowState) deadLetter(now time.Time) {
	t := r.row
	dl := cassandra.DeadLetter{
		Bucket:      r.bucket,
		Transaction: t,
		LastStatus:  r.out.Status,
		DeadAt:      now,
		WorkerID:    r.worker,
	}
	dl.Transaction.Attempt = t.Attempt + 1 // executions made, this one included
	if r.out.Err != nil {
		dl.LastError = r.out.Err.Error()
	}
	r.writes = []rowWrite{
		{kind: writeDeadLetter, dead: dl},
		{kind: writeFloor, floor: cassandra.Copy{Replay: t.Replay + 1}},
		{kind: writeDeadLettered},
	}
	r.end = rowAction{do: doFinish, finished: true, counts: []rowCount{countDeadLettered}, line: lineDeadLettered,
		write: rowWrite{dead: dl}}
}

// finishedBy is the counter of the reason the marker finishes a row at t without a call, 0 when it
// does not. It reads the marker in the order COMMITTED, floor, DEAD_LETTERED: each lives in cells
// of its own, so a COMMITTED finishes the row whatever a stalled or duplicate copy wrote after it
// (invariant 7), and an IN_PROGRESS never hides any of them.
func finishedBy(m cassandra.Marker, found bool, t cassandra.Transaction) rowCount {
	switch {
	case !found:
		return 0
	case m.Committed():
		return countSkippedCommitted
	case m.Superseded(t.Copy()):
		// A newer copy of the step exists (this row was recorded again, or given up on): it
		// runs at the window its backoff chose, and this one never again (invariant 9).
		return countSkippedSuperseded
	case !m.HasFloor && m.State == cassandra.MarkerDeadLettered:
		// Given up on before floors were written: executing a copy again would only repeat a
		// call the downstream refused for good or a step that ran out of attempts.
		return countSkippedDeadLettered
	default:
		return 0
	}
}

// rowGuard is what a guarded action of the row asks of the lease, beyond the guard's own check of
// the row's token.
type rowGuard struct {
	// sameEpoch refuses a lease of another epoch than epoch, the marker read's.
	sameEpoch bool
	epoch     uint64
	// orHeld: when the current lease no longer covers the token, held (the lease the execution
	// ran under) does, while it is valid for the action and settleMargin.
	orHeld bool
	held   lease.Lease
}

// settleGuard guards the writes that settle a row executed under held. The current lease allows
// them when it still covers the token. When it does not (a rebalance took the token away while the
// call ran, or the worker is leaving), the lease the execution ran under still does, as long as it
// is valid for the write's timeout: the coordinator hands the token on only after this worker
// released that epoch or left, which the lease client does only after Drain, and Drain waits for
// this row (runRow registered it in flight); or after the lease expired. Refusing here instead
// would leave an executed step unmarked, and a later pass would execute it again.
func settleGuard(held lease.Lease) rowGuard { return rowGuard{orHeld: true, held: held} }

// settleMargin is what the lease an execution ran under must still have beyond a settling write's
// timeout; the same as the guard's own margin.
const settleMargin = 100 * time.Millisecond

// allow turns the guard's answer for token (l, err) into g's, for an action of need. now is read
// only when the held lease decides.
func (g rowGuard) allow(token int64, l lease.Lease, err error, need time.Duration, now func() time.Time) (lease.Lease, error) {
	switch {
	case err != nil && g.orHeld && (errors.Is(err, lease.ErrTokenNotLeased) || errors.Is(err, lease.ErrNoLease)):
		if g.held.Ranges.Contains(token) && g.held.Remaining(now()) >= need+settleMargin {
			return g.held, nil
		}
		return lease.Lease{}, err
	case err != nil:
		return l, err
	case g.sameEpoch && l.Epoch != g.epoch:
		return lease.Lease{}, fmt.Errorf("%w: epoch %d since the marker was read under %d", lease.ErrTokenNotLeased, l.Epoch, g.epoch)
	}
	return l, nil
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
