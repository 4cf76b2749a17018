package deadletter

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	// ReplayMark reads the mark of d's row at the serial level: the outcome of a mark that
	// timed out.
	ReplayMark(ctx context.Context, d cassandra.DeadLetter) (by string, current bool, err error)
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
	// Tries bounds the tries of one statement that fails transiently (cassandra.Transient: a
	// timeout, too few replicas, an overloaded node) before the run stops on it. Default
	// DefaultTries.
	Tries int
	// DryRun lists what would be replayed and writes nothing (not even the run's start).
	DryRun bool
	// MarkerRetention is the floor's TTL (cassandra.DefaultMarkerRetention when zero).
	MarkerRetention time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Wait waits d before the next try of a statement that failed transiently, or returns ctx's
	// error; default a timer. Tests record the waits instead.
	Wait func(ctx context.Context, d time.Duration) error
	// Each, when set, is told of every dead letter the run takes up and what became of it, one
	// call at a time.
	Each func(d cassandra.DeadLetter, outcome Outcome, key cassandra.BucketKey)
}

// DefaultConcurrency is the replays in flight at once: enough for 500 per second
// at a few milliseconds per statement.
const DefaultConcurrency = 32

// Retries of a statement that failed transiently.
const (
	// DefaultTries is the tries of one statement: with the backoff below, a statement is given
	// up on after 8 to 16 s of a Cassandra that times out every time, far longer than the
	// timeouts of a busy node last.
	DefaultTries = 10
	// retryBase is the wait before the second try; each next wait doubles, up to retryCap, and
	// is jittered down to half so that the replays in flight do not come back together.
	retryBase = 50 * time.Millisecond
	retryCap  = 5 * time.Second
)

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
	// Retried counts the statements tried again after a transient failure; Settled the marks
	// whose outcome a timeout left unknown, read back at the serial level.
	Retried, Settled int
}

// left counts the dead letters the run has not finished with.
func (r ReplayResult) left() int {
	return r.Matched - r.Replayed - r.AlreadyReplayed - r.AlreadyDone - r.Superseded - r.Unmarked
}

// Replay replays the dead letters f selects that were given up on before the run's first start
// and are not replayed yet (see the package documentation for the protocol). A statement that
// fails transiently is tried again with backoff, up to o.Tries times; the run stops at the first
// statement that fails for good (or that many times), and returns ErrStopped with the counts so
// far. Nothing it did is undone or done twice by running the same ID again.
func Replay(ctx context.Context, st Store, rec Recorder, f Filter, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	if o.ID == "" || len(o.ID) > 128 {
		return res, fmt.Errorf("%w: %q (1 to 128 bytes)", ErrReplayID, o.ID)
	}
	if o.Rate < 0 {
		return res, fmt.Errorf("%w: %v per second", ErrRate, o.Rate)
	}
	if o.Tries < 0 {
		return res, fmt.Errorf("%w: %d", ErrTries, o.Tries)
	}
	if err := f.Validate(); err != nil {
		return res, err
	}
	p := newReplayer(st, rec, o)
	defer p.pace.stop()
	res.Started = p.now()
	if !o.DryRun {
		err := p.retry(ctx, func() error {
			started, err := st.StartReplayRun(ctx, o.ID, res.Started)
			if err == nil {
				res.Started = started
			}
			return err
		})
		if err != nil {
			return res, err
		}
	}
	if f.Until.After(res.Started) {
		f.Until = res.Started // the snapshot: what fails again during the run waits for another
	}
	if err := f.Validate(); err != nil {
		return res, err
	}
	var list []cassandra.DeadLetter
	if err := p.retry(ctx, func() (err error) {
		list, err = List(ctx, st, f)
		return err
	}); err != nil {
		return res, err
	}
	res.Matched = len(list)
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
			outcome, key, err := p.one(ctx, d)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("at dead letter %s/%s (given up on at %s): %w", d.Transaction.ID, d.Transaction.ImplType,
						d.DeadAt.UTC().Format(time.RFC3339Nano), err)
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
	res.Retried, res.Settled = int(p.retried.Load()), int(p.settled.Load())
	if first != nil {
		return res, fmt.Errorf("%w: %q, %d replayed, %d of %d left (run it again to complete it), %w",
			ErrStopped, o.ID, res.Replayed, res.left(), res.Matched, first)
	}
	return res, nil
}

// replayer replays one run's dead letters, each on its own goroutine.
type replayer struct {
	st    Store
	rec   Recorder
	o     ReplayOptions
	now   func() time.Time
	wait  func(ctx context.Context, d time.Duration) error
	tries int
	pace  *pacer

	retried, settled atomic.Int64

	// days holds one slot per dead_day partition: a partition's marks (and their serial reads)
	// go one at a time. Paxos orders the rounds of one partition, and rounds sent at once do not
	// queue: they contend, and under load the losers time out ("Operation timed out - received
	// only 0 responses") instead of waiting their turn. Every dead letter of a day shares its
	// partition, so 32 marks at once were 32 contending rounds.
	mu   sync.Mutex
	days map[window.Date]chan struct{}
}

func newReplayer(st Store, rec Recorder, o ReplayOptions) *replayer {
	p := &replayer{st: st, rec: rec, o: o, now: o.Now, wait: o.Wait, tries: o.Tries, pace: newPacer(o.Rate),
		days: map[window.Date]chan struct{}{}}
	if p.now == nil {
		p.now = time.Now
	}
	if p.wait == nil {
		p.wait = func(ctx context.Context, d time.Duration) error {
			if !wallclock.Sleep(ctx, d) {
				return ctx.Err()
			}
			return nil
		}
	}
	if p.tries == 0 {
		p.tries = DefaultTries
	}
	return p
}

// one replays d: read its marker, record the copy, raise the floor, mark it.
func (p *replayer) one(ctx context.Context, d cassandra.DeadLetter) (Outcome, cassandra.BucketKey, error) {
	t := d.Transaction
	if d.ReplayedBy != "" {
		return AlreadyReplayed, cassandra.BucketKey{}, nil
	}
	var (
		m     cassandra.Marker
		found bool
	)
	if err := p.retry(ctx, func() (err error) {
		m, found, err = p.st.Marker(ctx, t.ID, t.ImplType)
		return err
	}); err != nil {
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
	if p.o.DryRun {
		return WouldReplay, cassandra.BucketKey{}, nil
	}
	if err := p.pace.wait(ctx); err != nil {
		return "", cassandra.BucketKey{}, err
	}
	// A record retried after a timeout may land in a later window than the try that timed out
	// (which may have written its copy all the same): both copies stand at the floor, and the
	// first to run settles the other, as after a crash between the record and the mark.
	var key cassandra.BucketKey
	if err := p.retry(ctx, func() (err error) {
		key, err = p.rec.Record(ctx, recorder.Failure{
			TransactionID: t.ID, AllocationKey: t.AllocationKey, ImplType: t.ImplType,
			Attempt: next.Attempt, Replay: next.Replay, AddedAt: t.AddedAt, InstanceID: d.Bucket.InstanceID,
		})
		return err
	}); err != nil {
		return "", key, err
	}
	if err := p.retry(ctx, func() error {
		return p.st.SetFloor(ctx, t.ID, t.ImplType, next, p.o.MarkerRetention)
	}); err != nil {
		return "", key, err
	}
	outcome, err := p.mark(ctx, d)
	return outcome, key, err
}

// mark marks d replayed by the run. A compare-and-set that fails transiently may still be
// accepted (a Paxos proposal a later round completes), so before it is tried again its outcome is
// read at the serial level: a quorum read could miss an accepted proposal, and the mark would be
// written twice, or reported lost when it is there.
func (p *replayer) mark(ctx context.Context, d cassandra.DeadLetter) (Outcome, error) {
	for try := 1; ; try++ {
		release, err := p.partition(ctx, d.DeadDay())
		if err != nil {
			return "", err
		}
		err = p.st.MarkDeadLetterReplayed(ctx, d, p.o.ID, p.now())
		switch {
		case err == nil:
			release()
			return Replayed, nil
		case errors.Is(err, cassandra.ErrDeadLetterChanged):
			release()
			return Unmarked, nil
		case !cassandra.Transient(err):
			release()
			return "", err
		}
		var (
			by      string
			current bool
		)
		rerr := p.retry(ctx, func() (rerr error) {
			by, current, rerr = p.st.ReplayMark(ctx, d)
			return rerr
		})
		release()
		if rerr != nil {
			return "", fmt.Errorf("%w; then the read of its outcome failed: %w", err, rerr)
		}
		p.settled.Add(1)
		switch {
		case !current:
			return Unmarked, nil
		case by != "":
			// Ours, or another run's that marked it meanwhile: either way the row says replayed
			// and this run's copy is written.
			return Replayed, nil
		case try >= p.tries:
			return "", fmt.Errorf("%d tries, none applied: %w", try, err)
		}
		if werr := p.backoff(ctx, try); werr != nil {
			return "", fmt.Errorf("%w (then %w)", err, werr)
		}
	}
}

// partition waits for the slot of dead_day day's partition; release gives it back.
func (p *replayer) partition(ctx context.Context, day window.Date) (release func(), err error) {
	p.mu.Lock()
	slot, ok := p.days[day]
	if !ok {
		slot = make(chan struct{}, 1)
		p.days[day] = slot
	}
	p.mu.Unlock()
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// retry runs f until it succeeds, fails for good, or failed transiently p.tries times.
func (p *replayer) retry(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		switch {
		case err == nil || !cassandra.Transient(err):
			return err
		case try >= p.tries:
			return fmt.Errorf("%d tries: %w", try, err)
		}
		if werr := p.backoff(ctx, try); werr != nil {
			return fmt.Errorf("%w (then %w)", err, werr)
		}
	}
}

// backoff waits before try+1: retryBase doubled per try, at most retryCap, jittered into its
// upper half.
func (p *replayer) backoff(ctx context.Context, try int) error {
	p.retried.Add(1)
	d := min(retryBase<<min(try-1, 16), retryCap)
	d = d/2 + rand.N(d/2+1)
	return p.wait(ctx, d)
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
