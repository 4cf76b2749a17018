package deadletter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// Store is what a replay needs of Cassandra; *cassandra.Store is one.
type Store interface {
	Lister
	Marker(ctx context.Context, transactionID, span string) (cassandra.Marker, bool, error)
	SetFloor(ctx context.Context, transactionID, span string, c cassandra.Copy, retention time.Duration) error
	MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, replayID string, at time.Time) error
	StartReplayRun(ctx context.Context, id string, at time.Time) (time.Time, error)
}

// Recorder writes a failure into the directory; *recorder.Recorder is one.
type Recorder interface {
	Record(ctx context.Context, f recorder.Failure) (cassandra.BucketKey, error)
}

// ReplayOptions configure a replay run.
type ReplayOptions struct {
	// ID names the run (required, at most 128 bytes): running the same ID again replays nothing
	// new and completes what a failed run left.
	ID string
	// Rate bounds the dead letters replayed per second; 0: as fast as Cassandra takes them.
	Rate float64
	// Concurrency is the number of dead letters replayed at once (each is four statements in a
	// row). Default DefaultConcurrency.
	Concurrency int
	// DryRun lists what would be replayed and writes nothing (not even the run's start).
	DryRun bool
	// MarkerRetention is the floor's TTL (cassandra.DefaultMarkerRetention when zero).
	MarkerRetention time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Each, when set, is told of every dead letter the run takes up and what became of it, one
	// call at a time.
	Each func(d cassandra.DeadLetter, outcome Outcome, key cassandra.BucketKey)
}

// DefaultConcurrency is the replays in flight at once: enough for 500 per second
// at a few milliseconds per statement.
const DefaultConcurrency = 32

// Outcome is what a replay did with one dead letter.
type Outcome string

// Outcomes of one dead letter in a replay.
const (
	Replayed        Outcome = "replayed"         // recorded again, floor raised, marked
	WouldReplay     Outcome = "would_replay"     // dry run
	AlreadyReplayed Outcome = "already_replayed" // marked by this run or another before
	AlreadyDone     Outcome = "already_done"     // its step is COMMITTED: nothing to retry
	// Superseded: the step's floor is past the copy a replay would write, so a newer copy of the
	// step exists already (an earlier replay whose mark was lost, and whose copy ran since). A
	// copy written now would be finished at once without a call, so none is written, and the dead
	// letter is left unmarked: no replay of this run took it.
	Superseded Outcome = "superseded"
	// Unmarked: the copy was written and the floor raised, but the dead letter changed before it
	// could be marked (purged, or the step given up on again and its row written over), so the
	// mark was not written. The copy runs as any replay's; the mark is not tried again, as the
	// dead letter it was for is gone.
	Unmarked Outcome = "copied_unmarked"
)

// ReplayResult counts a run.
type ReplayResult struct {
	// Started is the run's first start: the snapshot bound.
	Started time.Time
	// Matched counts the dead letters the filter selected before the bound; the others what
	// became of them.
	Matched, Replayed, AlreadyReplayed, AlreadyDone, Superseded, Unmarked int
}

// Replay replays the dead letters f selects that were given up on before the run's first start
// and are not replayed yet (see the package documentation for the protocol). It stops at the first
// failed query and returns it with the counts so far; nothing it did is undone or done twice by
// running the same ID again.
func Replay(ctx context.Context, st Store, rec Recorder, f Filter, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if o.ID == "" || len(o.ID) > 128 {
		return res, fmt.Errorf("%w: %q (1 to 128 bytes)", ErrReplayID, o.ID)
	}
	if o.Rate < 0 {
		return res, fmt.Errorf("%w: %v per second", ErrRate, o.Rate)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	if err := f.Validate(); err != nil {
		return res, err
	}
	res.Started = now()
	if !o.DryRun {
		started, err := st.StartReplayRun(ctx, o.ID, res.Started)
		if err != nil {
			return res, err
		}
		res.Started = started
	}
	if f.Until.After(res.Started) {
		f.Until = res.Started // the snapshot: what fails again during the run waits for another
	}
	if err := f.Validate(); err != nil {
		return res, err
	}
	list, err := List(ctx, st, f)
	if err != nil {
		return res, err
	}
	res.Matched = len(list)
	pace := newPacer(o.Rate)
	defer pace.stop()
	conc := o.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, conc)
	)
	for _, d := range list {
		slots <- struct{}{} // then look: a replay that just failed has given its slot back
		mu.Lock()
		stopped := first != nil
		mu.Unlock()
		if stopped {
			break
		}
		wg.Add(1)
		go func(d cassandra.DeadLetter) {
			defer wg.Done()
			defer func() { <-slots }()
			outcome, key, err := replayOne(ctx, st, rec, d, o, now, pace)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("at %s/%s: %w", d.Transaction.ID, d.Transaction.ImplType, err)
				}
				return
			}
			switch outcome {
			case Replayed, WouldReplay:
				res.Replayed++
			case AlreadyReplayed:
				res.AlreadyReplayed++
			case AlreadyDone:
				res.AlreadyDone++
			case Superseded:
				res.Superseded++
			case Unmarked:
				res.Unmarked++
			}
			if o.Each != nil {
				o.Each(d, outcome, key)
			}
		}(d)
	}
	wg.Wait()
	if first != nil {
		return res, fmt.Errorf("deadletter: replay %q stopped (%d replayed; run it again to complete it) %w", o.ID, res.Replayed, first)
	}
	return res, nil
}

func replayOne(ctx context.Context, st Store, rec Recorder, d cassandra.DeadLetter, o ReplayOptions, now func() time.Time, pace *pacer) (Outcome, cassandra.BucketKey, error) {
	t := d.Transaction
	if d.ReplayedBy != "" {
		return AlreadyReplayed, cassandra.BucketKey{}, nil
	}
	m, found, err := st.Marker(ctx, t.ID, t.ImplType)
	if err != nil {
		return "", cassandra.BucketKey{}, err
	}
	if alreadyDone(m, found) {
		return AlreadyDone, cassandra.BucketKey{}, nil
	}
	next := cassandra.Copy{Replay: t.Replay + 1}
	if m.Superseded(next) {
		// The copy would be below the floor, finished at once by the first pass that reads it:
		// counting it as replayed would report a retry that never happens.
		return Superseded, cassandra.BucketKey{}, nil
	}
	if o.DryRun {
		return WouldReplay, cassandra.BucketKey{}, nil
	}
	if err := pace.wait(ctx); err != nil {
		return "", cassandra.BucketKey{}, err
	}
	key, err := rec.Record(ctx, recorder.Failure{
		TransactionID: t.ID, AllocationKey: t.AllocationKey, ImplType: t.ImplType,
		Attempt: next.Attempt, Replay: next.Replay, AddedAt: t.AddedAt, InstanceID: d.Bucket.InstanceID,
	})
	if err != nil {
		return "", key, err
	}
	if err := st.SetFloor(ctx, t.ID, t.ImplType, next, o.MarkerRetention); err != nil {
		return "", key, err
	}
	err = st.MarkDeadLetterReplayed(ctx, d, o.ID, now())
	switch {
	case errors.Is(err, cassandra.ErrDeadLetterChanged):
		return Unmarked, key, nil
	case err != nil:
		return "", key, err
	}
	return Replayed, key, nil
}

// alreadyDone reports whether the step of a dead letter ran to success after all: a duplicate
// copy of it (the same step recorded under two instance ids) was given up on after another copy
// committed. The marker reads COMMITTED first, whatever DEAD_LETTERED came after it; replaying
// the step would run it again (invariant 7), so the replay counts it as already done instead.
func alreadyDone(m cassandra.Marker, found bool) bool { return found && m.Committed() }

// pacer spaces replays 1/rate apart.
type pacer struct{ tick *time.Ticker }

func newPacer(rate float64) *pacer {
	if rate <= 0 {
		return &pacer{}
	}
	return &pacer{tick: time.NewTicker(time.Duration(float64(time.Second) / rate))}
}

func (p *pacer) wait(ctx context.Context) error {
	if p.tick == nil {
		return ctx.Err()
	}
	select {
	case <-p.tick.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pacer) stop() {
	if p.tick != nil {
		p.tick.Stop()
	}
}

// Purger deletes dead letters; *cassandra.Store is one.
type Purger interface {
	Lister
	DeleteDeadLetter(ctx context.Context, d cassandra.DeadLetter) error
	DeleteDeadLetterDay(ctx context.Context, deadDay window.Date) error
}

// Purge deletes the dead letters f selects and returns how many. A day the filter covers whole,
// with no other criterion, goes by one partition delete; the rest row by row.
func Purge(ctx context.Context, st Purger, f Filter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	whole := len(f.Impl) == 0 && len(f.Status) == 0 && len(f.Instance) == 0
	n := 0
	for _, day := range f.days() {
		ds, err := st.ListDeadLetters(ctx, day)
		if err != nil {
			return n, err
		}
		if whole && !day.Time().Before(f.since()) && !day.AddDays(1).Time().After(f.Until) {
			if len(ds) > 0 {
				if err := st.DeleteDeadLetterDay(ctx, day); err != nil {
					return n, err
				}
			}
			n += len(ds)
			continue
		}
		for _, d := range ds {
			if !f.Match(d) {
				continue
			}
			if err := st.DeleteDeadLetter(ctx, d); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
