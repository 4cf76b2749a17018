package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// The checked deletes (docs/schema.md, "Checked deletes") against a late writer whose clock lags
// the worker's write clock by the whole bound, fired at an exact step of the deleter's. The env's
// store is that writer: it stamps every write max_clock_offset behind the wall clock, which the
// workers' deletes are stamped from.

// stepStore is the Store a Scanner uses, with a hook run at the steps below: right after a call
// returns (the call's result is what the Scanner then sees), or before it is sent. Hooks run one
// at a time.
type stepStore struct {
	*cassandra.Store
	mu    sync.Mutex
	after func(call, about string) // about: the instance, window or day the call is about
}

func (s *stepStore) step(call, about string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.after != nil {
		s.after(call, about)
	}
}

func (s *stepStore) ListBuckets(ctx context.Context, w window.Window, id string) ([]int, error) {
	bs, err := s.Store.ListBuckets(ctx, w, id)
	s.step("ListBuckets", id)
	return bs, err
}

func (s *stepStore) DeleteBucket(ctx context.Context, w window.Window, id string, b int, at time.Time) error {
	err := s.Store.DeleteBucket(ctx, w, id, b, at)
	s.step("DeleteBucket", id)
	return err
}

func (s *stepStore) DeleteInstance(ctx context.Context, w window.Window, id string, at time.Time) error {
	s.step("before DeleteInstance", id)
	err := s.Store.DeleteInstance(ctx, w, id, at)
	s.step("DeleteInstance", id)
	return err
}

func (s *stepStore) ReadBucketPage(ctx context.Context, b cassandra.BucketKey, state []byte) ([]cassandra.Transaction, []byte, error) {
	rows, next, err := s.Store.ReadBucketPage(ctx, b, state)
	s.step("ReadBucketPage", b.InstanceID)
	return rows, next, err
}

func (s *stepStore) HasInstances(ctx context.Context, w window.Window) (bool, error) {
	left, err := s.Store.HasInstances(ctx, w)
	if !left {
		s.step("HasInstances empty", w.String())
	}
	return left, err
}

func (s *stepStore) SetWindowCheckpoint(ctx context.Context, d window.Date, prev cassandra.WindowCheckpoint, minute int) (bool, error) {
	s.step("before SetWindowCheckpoint", d.String())
	return s.Store.SetWindowCheckpoint(ctx, d, prev, minute)
}

func (s *stepStore) SetDayCheckpoint(ctx context.Context, year int, prev cassandra.DayCheckpoint, first window.Date) (bool, error) {
	s.step("before SetDayCheckpoint", first.String())
	return s.Store.SetDayCheckpoint(ctx, year, prev, first)
}

// lateWrite records failures into the past window target through the recorder's late protocol
// (a fresh bucket, bottom up, checkpoints lowered), with the env's clock lagging by the bound.
func (e *env) lateWrite(instance string, target window.Window, txs ...string) {
	e.t.Helper()
	rec, err := uncheckedRecorder(e.store, recorder.Config{InstanceID: instance, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	fs := make([]recorder.Failure, len(txs))
	for i, tx := range txs {
		fs[i] = recorder.Failure{TransactionID: tx, ImplType: "Payment"}
	}
	if err := rec.RecordAt(context.Background(), target, fs...); err != nil {
		e.t.Errorf("late write into %s: %v", target, err)
	}
}

// windowCheckpoint reads the tier-2 scan bound of d.
func (e *env) windowCheckpoint(d window.Date) int {
	e.t.Helper()
	cp, err := e.store.WindowCheckpoint(context.Background(), d)
	if err != nil {
		e.t.Fatal(err)
	}
	return cp.Minute
}

// dayCheckpoint reads the tier-1 scan bound of d's year.
func (e *env) dayCheckpoint(year int) window.Date {
	e.t.Helper()
	cp, err := e.store.DayCheckpoint(context.Background(), year)
	if err != nil {
		e.t.Fatal(err)
	}
	return cp.Date
}

// assertRanOnce checks that each transaction ran exactly once.
func assertRanOnce(t *testing.T, ex *recordingExecutor, txs ...string) {
	t.Helper()
	runs := ex.runs()
	for _, tx := range txs {
		if runs[tx] != 1 {
			t.Errorf("%s ran %d times, want 1", tx, runs[tx])
		}
	}
}

// TestLateInstanceRowSurvivesTheInstanceDelete: once the worker has drained instance pod-a of a
// past window, a late writer (lagging by the bound) writes a fresh bucket and pod-a's instance
// row again, either between the worker's check of tier 4 and its delete of the instance row, or
// once both are done. The instance row must survive: it is listed again, its failure runs once,
// and Node-0 keeps the window (gate 1 sees the instance) with the checkpoint at it.
func TestLateInstanceRowSurvivesTheInstanceDelete(t *testing.T) {
	for _, phase := range []string{"between check and delete", "after check and delete"} {
		t.Run(phase, func(t *testing.T) {
			e := newEnv(t, 1, noon)
			w := e.win(window.DateOf(noon).AddDays(-1), 600)
			e.record("pod-a", w, 10, "tx-0", "tx-1")
			st := &stepStore{Store: e.store}
			var once sync.Once
			drained, checked, deleted := false, false, false
			st.after = func(call, about string) {
				if about != "pod-a" {
					return
				}
				switch call {
				case "DeleteBucket":
					drained = true
				case "ListBuckets":
					checked = checked || drained
				case "DeleteInstance":
					deleted = deleted || drained
				}
				if checked && (deleted || phase == "between check and delete") {
					once.Do(func() { e.lateWrite("pod-a", w, "late-1") })
				}
			}
			ex := &recordingExecutor{}
			sc, err := New(e.config("w0"), st, e.guard(fullRing(), 0, 1, time.Hour), ex)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sc.Cycle(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !checked {
				t.Fatal("the worker never checked pod-a's buckets after draining them: the late write never fired")
			}
			in, err := e.store.ListAllInstances(context.Background(), w, 0)
			if err != nil || len(in) != 1 {
				t.Fatalf("instance rows of %s after the late write: %v, %v; want pod-a's", w, in, err)
			}
			if !containsWindow(e.windowsLeft(), w) {
				t.Errorf("Node-0 deleted %s, which holds the late instance row", w)
			}
			if cp := e.windowCheckpoint(w.Day); cp > w.Minute {
				t.Errorf("window checkpoint raised to minute %d, past %s", cp, w)
			}
			drain(t, sc, 10)
			assertRanOnce(t, ex, "tx-0", "tx-1", "late-1")
			e.assertDrained(DefaultMaxClockOffset)
		})
	}
}

// TestLateRowSurvivesTheBucketPartitionDelete: a row written into a bucket right after the
// worker read it (a frame that went out late, by a writer lagging by the bound) survives the
// bucket's partition delete, keeps the bucket's tier-4 row and the instance row, and runs once on
// the next pass.
func TestLateRowSurvivesTheBucketPartitionDelete(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon).AddDays(-1), 600)
	e.record("pod-a", w, 10, "tx-0", "tx-1")
	key := cassandra.BucketKey{Window: w, InstanceID: "pod-a", Bucket: 0}
	st := &stepStore{Store: e.store}
	var once sync.Once
	st.after = func(call, about string) {
		if call == "ReadBucketPage" && about == "pod-a" {
			once.Do(func() {
				late := cassandra.Transaction{ID: "late-row", ImplType: "Payment", AddedAt: e.clock.Now()}
				if err := e.store.InsertTransaction(context.Background(), key, late); err != nil {
					t.Error(err)
				}
			})
		}
	}
	ex := &recordingExecutor{}
	sc, err := New(e.config("w0"), st, e.guard(fullRing(), 0, 1, time.Hour), ex)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bs, err := e.store.ListBuckets(context.Background(), w, "pod-a"); err != nil || len(bs) != 1 {
		t.Fatalf("buckets of pod-a after the late row: %v, %v; want bucket 0 kept", bs, err)
	}
	drain(t, sc, 10)
	assertRanOnce(t, ex, "tx-0", "tx-1", "late-row")
	e.assertDrained(DefaultMaxClockOffset)
}

// TestLateWindowRowSurvivesTheWindowDelete: Node-0 deletes a drained window, and a late writer
// (lagging by the bound) publishes an instance and the window row again, either between gate 1
// and the delete or after the delete, before Node-0 raises the day's checkpoint. The window row
// survives, the checkpoint stays at it, the day stays, and the late failure runs once.
func TestLateWindowRowSurvivesTheWindowDelete(t *testing.T) {
	for _, phase := range []string{"between gate 1 and the delete", "after the delete"} {
		t.Run(phase, func(t *testing.T) {
			e := newEnv(t, 1, noon)
			w := e.win(window.DateOf(noon).AddDays(-1), 600)
			e.record("pod-a", w, 10, "tx-0")
			st := &stepStore{Store: e.store}
			var once sync.Once
			fire := map[string]string{
				"between gate 1 and the delete": "HasInstances empty",
				"after the delete":              "before SetWindowCheckpoint",
			}[phase]
			st.after = func(call, about string) {
				if call == fire && (about == w.String() || about == w.Day.String()) {
					once.Do(func() { e.lateWrite("pod-import", w, "late-w") })
				}
			}
			ex := &recordingExecutor{}
			sc, err := New(e.config("w0"), st, e.guard(fullRing(), 0, 1, time.Hour), ex)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sc.Cycle(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !containsWindow(e.windowsLeft(), w) {
				t.Errorf("%s is gone from tier 2: the late instance row is unreachable", w)
			}
			if cp := e.windowCheckpoint(w.Day); cp > w.Minute {
				t.Errorf("window checkpoint raised to minute %d, past %s", cp, w)
			}
			if !containsDay(e.daysLeft(), w.Day) {
				t.Errorf("Node-0 deleted day %s, which holds %s", w.Day, w)
			}
			drain(t, sc, 10)
			assertRanOnce(t, ex, "tx-0", "late-w")
			e.assertDrained(DefaultMaxClockOffset)
		})
	}
}

// TestLateDayRowSurvivesTheDayDelete: Node-0 deletes a drained day older than the lookback (so
// only tier 1 leads to it), and a late writer (lagging by the bound) publishes a window and the
// day row again after the delete, before Node-0 raises the year's checkpoint. The day row
// survives, the checkpoint stays at it, and the late failure runs once.
func TestLateDayRowSurvivesTheDayDelete(t *testing.T) {
	e := newEnv(t, 1, noon)
	old := window.DateOf(noon).AddDays(-10) // DefaultLookbackDays is 2
	e.record("pod-a", e.win(old, 600), 10, "tx-0")
	late := e.win(old, 30)
	st := &stepStore{Store: e.store}
	var once sync.Once
	st.after = func(call, _ string) {
		if call == "before SetDayCheckpoint" {
			once.Do(func() { e.lateWrite("pod-import", late, "late-d") })
		}
	}
	ex := &recordingExecutor{}
	sc, err := New(e.config("w0"), st, e.guard(fullRing(), 0, 1, time.Hour), ex)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !containsDay(e.daysLeft(), old) {
		t.Errorf("day %s is gone from tier 1: the late window is unreachable", old)
	}
	if cp := e.dayCheckpoint(old.Year); cp.After(old) {
		t.Errorf("day checkpoint raised to %s, past %s", cp, old)
	}
	drain(t, sc, 10)
	assertRanOnce(t, ex, "tx-0", "late-d")
	e.assertDrained(DefaultMaxClockOffset)
}

// TestNoReleaseBetweenCheckAndDelete: right after the worker's first step of the instance delete
// (its check of tier 4, or on a deleter without one, the delete), the lease client switches the
// guard to a lease without the instance's token and waits in Drain to release it, while a late
// writer (lagging by the bound) writes a fresh bucket and the instance row again. Drain must not
// return before the delete was sent, and the new owner must find and run the late failure once.
func TestNoReleaseBetweenCheckAndDelete(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon).AddDays(-1), 600)
	e.record("pod-a", w, 10, "tx-0")
	g := e.guard(fullRing(), 0, 1, time.Hour)
	old, _ := g.Current()
	next := old
	next.Epoch, next.Ranges, next.NodeIndex, next.NodeCount = 2, nil, 1, 2

	var sc *Scanner
	released := make(chan error, 1)
	var once sync.Once
	fired := false
	st := &stepStore{Store: e.store}
	drainedBucket := false
	st.after = func(call, about string) {
		if about != "pod-a" {
			return
		}
		switch call {
		case "DeleteBucket":
			drainedBucket = true
		case "before DeleteInstance":
			if fired {
				select {
				case err := <-released:
					t.Errorf("Drain returned (%v) between the check and the delete", err)
				default:
				}
			}
		case "ListBuckets", "DeleteInstance":
			if !drainedBucket {
				return
			}
			once.Do(func() {
				fired = true
				e.lateWrite("pod-a", w, "late-1")
				g.Set(next)
				go func() { released <- sc.Drain(context.Background(), old, next) }()
			})
		}
	}
	ex := &recordingExecutor{}
	var err error
	if sc, err = New(e.config("w0"), st, g, ex); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Cycle(context.Background()); err != nil && !lease.IsGuardError(err) {
		t.Fatal(err)
	}
	if !fired {
		t.Fatal("the instance delete never started: nothing was tested")
	}
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Drain never returned")
	}

	// The new owner of the token.
	owner, err := New(e.config("w1"), e.store, e.guard(fullRing(), 0, 1, time.Hour), ex)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, owner, 10)
	assertRanOnce(t, ex, "tx-0", "late-1")
	e.assertDrained(DefaultMaxClockOffset)
}

// TestRowsOutlivingTheirDeleteKeepTheCheckpoints is the trap of a delete stamped in the past: a
// window row and an empty day row written by a writer whose clock is the worker's, just before
// Node-0's checks, survive its deletes. Node-0 reads them back, keeps both checkpoints at them
// (invariant 8: no live row below a checkpoint), and deletes them on a pass once the bound has
// passed.
func TestRowsOutlivingTheirDeleteKeepTheCheckpoints(t *testing.T) {
	e := newEnv(t, 1, noon)
	ctx := context.Background()
	yesterday := window.DateOf(noon).AddDays(-1)
	stale, fresh := e.win(yesterday, 700), e.win(yesterday, 600)
	empty := window.DateOf(noon).AddDays(-10)
	for _, err := range []error{e.store.InsertDay(ctx, yesterday), e.store.InsertWindow(ctx, stale)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The worker's write clock stands still from here on, so that what survives is decided by
	// timestamps alone; the punctual writer shares it.
	stamps := clocktest.New(time.Now())
	punctual := e.store.WithWriteClock(stamps)
	for _, err := range []error{punctual.InsertWindow(ctx, fresh), punctual.InsertDay(ctx, empty)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config("w0")
	cfg.WriteClock = stamps
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, time.Hour), &recordingExecutor{})
	if _, err := sc.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if s := sc.Stats(); s.Outlived != 2 || s.WindowsDeleted != 1 || s.DaysDeleted != 0 {
		t.Errorf("outlived %d, windows deleted %d, days deleted %d; want 2 (%s, %s), 1 (%s), 0",
			s.Outlived, s.WindowsDeleted, s.DaysDeleted, fresh, empty, stale)
	}
	if ws := e.windowsLeft(); len(ws) != 1 || ws[0] != fresh {
		t.Errorf("tier 2 holds %v, want %s alone", ws, fresh)
	}
	if cp := e.windowCheckpoint(yesterday); cp > fresh.Minute {
		t.Errorf("window checkpoint raised to minute %d, past %s, which outlived its delete", cp, fresh)
	}
	if cp := e.dayCheckpoint(empty.Year); cp.After(empty) {
		t.Errorf("day checkpoint raised to %s, past %s, which outlived its delete", cp, empty)
	}

	stamps.Advance(DefaultMaxClockOffset + time.Millisecond)
	drain(t, sc, 5)
	e.assertDrained(DefaultMaxClockOffset)
}

func containsWindow(ws []window.Window, w window.Window) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

func containsDay(ds []window.Date, d window.Date) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}
