package worker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// setControls renews g's lease with controls c (a renewal: same epoch, same ranges).
func setControls(g *lease.Guard, c *lease.Controls) {
	l, _ := g.Current()
	l.Controls = c
	g.Set(l)
}

// TestPauseHoldsRowsAndResumeRunsThem: a pause that comes while a call is in flight lets that
// call finish and settle, and starts nothing more; while the ring is paused a cycle traverses
// nothing; the rows stay where they are with their attempts, and no marker is written for them.
// After the resume each runs once, as its first attempt.
func TestPauseHoldsRowsAndResumeRunsThem(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 700)
	txs := ids("tx", 10)
	e.record("pod-a", w, 100, txs...)

	g := e.guard(fullRing(), 0, 1, time.Hour)
	var once sync.Once
	ex := &recordingExecutor{answer: func(Task, int) Outcome {
		once.Do(func() { setControls(g, &lease.Controls{Paused: true}) }) // the operator pauses mid-call
		return Outcome{Kind: Done, Status: 200}
	}}
	logs := &logLines{}
	cfg := e.config("w0")
	cfg.Concurrency = 1
	cfg.Logger = zerolog.New(logs)
	sc := e.scanner(cfg, g, ex)
	res, err := sc.Cycle(context.Background())
	if err != nil || !res.Paused {
		t.Fatalf("cycle paused mid-way: %+v, %v", res, err)
	}
	first := ex.all()
	if len(first) != 1 {
		t.Fatalf("%d executions after the pause came, want the one in flight", len(first))
	}
	if m, ok := e.marker(first[0].TransactionID); !ok || m.State != cassandra.MarkerCommitted {
		t.Errorf("the call in flight did not settle: marker %+v, %v", m, ok)
	}
	kept := logs.with(t, "bucket kept")
	if len(kept) != 1 || !strings.Contains(kept[0]["why"].(string), "paused") {
		t.Errorf("bucket kept lines %v; want one saying paused", kept)
	}

	before := e.store.Statements()
	for i := 0; i < 3; i++ {
		res, err := sc.Cycle(context.Background())
		if err != nil || !res.Paused || res.Progress() || res.Windows != 0 {
			t.Fatalf("paused cycle: %+v, %v", res, err)
		}
	}
	if n := e.store.Statements() - before; n != 0 {
		t.Errorf("%d queries while the ring was paused, want none", n)
	}
	if n := len(ex.all()); n != 1 {
		t.Fatalf("%d executions while paused", n)
	}
	for _, id := range txs {
		if id == first[0].TransactionID {
			continue
		}
		if m, ok := e.marker(id); ok {
			t.Errorf("%s has a marker %+v although it never ran", id, m)
		}
		if c := e.copiesOf(id); len(c) != 1 || !strings.HasSuffix(c[0], "r0/a0") {
			t.Errorf("%s rows %v; want its row in place, attempt 0", id, c)
		}
	}

	setControls(g, &lease.Controls{}) // resumed
	drain(t, sc, 3)
	runs := ex.runs()
	for _, task := range ex.all() {
		if runs[task.TransactionID] != 1 || task.Attempt != 0 {
			t.Errorf("%s ran %d times, this time as attempt %d; want once, attempt 0", task.TransactionID, runs[task.TransactionID], task.Attempt)
		}
	}
	if len(runs) != len(txs) {
		t.Errorf("%d of %d transactions ran after the resume", len(runs), len(txs))
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestImplPauseHoldsOnlyThatStep: with the step Ship paused, the traversal goes on and Payment
// runs; Ship's rows stay, unexecuted, with no IN_PROGRESS marker and no attempt used, and run
// once the pause is lifted.
func TestImplPauseHoldsOnlyThatStep(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 700)
	pay, ship := ids("pay", 5), ids("ship", 5)
	e.recordStep("Payment", "pod-a", w, 100, pay...)
	e.recordStep("Ship", "pod-a", w, 100, ship...)

	g := e.guard(fullRing(), 0, 1, time.Hour)
	setControls(g, &lease.Controls{PausedImpl: []string{"Ship"}})
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), g, ex)
	res := drain(t, sc, 3)
	if res.HeldPaused < uint64(len(ship)) || res.Executed != uint64(len(pay)) || res.BucketsKept == 0 {
		t.Fatalf("with Ship paused: %+v", res)
	}
	for _, task := range ex.all() {
		if task.ImplType != "Payment" {
			t.Fatalf("executed %s of a paused step", task.TransactionID)
		}
	}
	for _, id := range ship {
		if m, ok := e.stepMarker(id, "Ship"); ok {
			t.Errorf("%s: marker %+v written for a paused step", id, m)
		}
		if c := e.copiesOf(id); len(c) != 1 || !strings.HasSuffix(c[0], "r0/a0") {
			t.Errorf("%s rows %v; want its row in place, attempt 0", id, c)
		}
	}

	setControls(g, nil) // a coordinator that sends no controls pauses nothing
	drain(t, sc, 3)
	runs := ex.runs()
	for _, id := range append(pay, ship...) {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want once", id, runs[id])
		}
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestNoShareOfTheRateHoldsRows: a worker whose share of the ring's rate is 0 executes nothing
// and keeps its rows; with a share it executes them.
func TestNoShareOfTheRateHoldsRows(t *testing.T) {
	e := newEnv(t, 1, noon)
	txs := ids("tx", 4)
	e.record("pod-a", e.win(window.DateOf(noon), 700), 100, txs...)
	g := e.guard(fullRing(), 0, 1, time.Hour)
	zero, plenty := 0.0, 1000.0
	setControls(g, &lease.Controls{RatePerS: &zero})
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), g, ex)
	if res := drain(t, sc, 2); res.Executed != 0 || res.BucketsKept == 0 {
		t.Fatalf("with no share: %+v", res)
	}
	setControls(g, &lease.Controls{RatePerS: &plenty})
	drain(t, sc, 3)
	if runs := ex.runs(); len(runs) != len(txs) {
		t.Fatalf("runs %v with a share of 1000/s", runs)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestBreakerStopsCallsDuringAnOutage: a downstream that answers 503 to everything opens the
// step's breaker after 20 transient failures; the calls stop, the rest of the rows stay with
// their attempts unused; during the cool-off nothing is called, and the kept bucket is said once
// at info, not once per pass; after it, once the downstream is back, the probes succeed, the
// breaker closes and every row runs: the ones that never ran as their first attempt, the ones
// that failed at their window as their second.
func TestBreakerStopsCallsDuringAnOutage(t *testing.T) {
	e := newEnv(t, 1, noon)
	txs := ids("tx", 60)
	e.record("pod-a", e.win(window.DateOf(noon), 700), 1000, txs...)
	var mu sync.Mutex
	down := true
	ex := &recordingExecutor{answer: func(task Task, n int) Outcome {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return unavailable(task, n)
		}
		return Outcome{Kind: Done, Status: 200}
	}}
	cfg := e.config("w0")
	cfg.Concurrency = 1 // each outcome is known before the next call: the count is exact
	logs := &logLines{}
	cfg.Logger = zerolog.New(logs).Level(zerolog.InfoLevel)
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, 24*time.Hour), ex)

	res, err := sc.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Stats; s.Executed != breakerMinCalls || s.Rerecorded != breakerMinCalls || s.BreakerRefused != uint64(len(txs)-breakerMinCalls) || s.BucketsKept != 1 {
		t.Fatalf("during the outage: %+v; want %d calls, the rest refused by the breaker", s, breakerMinCalls)
	}
	called := ex.runs()
	for _, id := range txs {
		c := e.copiesOf(id)
		switch {
		case called[id] > 0 && len(c) != 2: // the kept original and its copy, attempt 1
			t.Errorf("%s failed once: rows %v", id, c)
		case called[id] == 0 && (len(c) != 1 || !strings.HasSuffix(c[0], "r0/a0")):
			t.Errorf("%s never ran: rows %v; want its row in place, attempt 0", id, c)
		}
	}
	r := sc.Report()
	if len(r.Breakers) != 1 || r.Breakers[0].Impl != "Payment" || r.Breakers[0].State != "open" {
		t.Errorf("report breakers %+v; want Payment's open", r.Breakers)
	}

	mu.Lock()
	down = false
	mu.Unlock()
	res, err = sc.Cycle(context.Background())
	if err != nil || res.Stats.Executed != 0 || res.Stats.BreakerRefused == 0 {
		t.Fatalf("during the cool-off: %+v, %v; want no call", res.Stats, err)
	}

	if kept := logs.with(t, "bucket kept"); len(kept) != 1 || kept[0]["level"] != "info" || !strings.Contains(kept[0]["why"].(string), "breaker open") {
		t.Errorf("bucket kept lines %v; want one at info saying the breaker is open, however many passes keep it", kept)
	}

	e.clock.Advance(breakerCoolOff)
	drain(t, sc, 3)
	if r := sc.Report(); len(r.Breakers) != 0 {
		t.Errorf("breakers %+v after the recovery; want all closed", r.Breakers)
	}
	e.clock.Advance(10 * time.Minute) // past the copies' windows
	drain(t, sc, 3)
	runs := ex.runs()
	for _, task := range ex.all() {
		if want := 1 + min(called[task.TransactionID], 1); runs[task.TransactionID] != want {
			t.Errorf("%s ran %d times, want %d", task.TransactionID, runs[task.TransactionID], want)
		}
	}
	if len(runs) != len(txs) {
		t.Errorf("%d of %d transactions ran", len(runs), len(txs))
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestReportShowsTheBacklog: a row another worker holds keeps its window unfinished, and the
// report says so (the window's start, one pending row); rows in another worker's range do not
// count in this worker's backlog, but Node-0 shows the oldest window of the whole directory.
// Once the held step is done elsewhere, the next pass reports nothing pending.
func TestReportShowsTheBacklog(t *testing.T) {
	e := newEnv(t, 1, noon)
	day := window.DateOf(noon)
	older, held := e.win(day, 600), e.win(day, 700)
	e.record("pod-a", held, 10, "held", "free")
	e.record("pod-b", older, 10, "theirs")
	ctx := context.Background()
	if err := e.store.MarkInProgress(ctx, "held", "Payment", "other-worker", noon, time.Hour); err != nil {
		t.Fatal(err)
	}
	b := cassandra.Token("pod-b")
	ours := lease.Ranges{lease.FullRing}.Subtract(lease.Ranges{{Start: b, End: b}})
	sc := e.scanner(e.config("w0"), e.guard(ours, 0, 2, time.Hour), &recordingExecutor{})
	drain(t, sc, 3)
	r := sc.Report()
	if r.OldestWindowStartMs != held.Start().UnixMilli() || r.PendingRows != 1 {
		t.Errorf("backlog %s, %d rows; want %s, 1 row", time.UnixMilli(r.OldestWindowStartMs).UTC(), r.PendingRows, held)
	}
	if r.DirectoryOldestWindowStartMs != older.Start().UnixMilli() {
		t.Errorf("Node-0 saw the directory's oldest window at %s, want %s", time.UnixMilli(r.DirectoryOldestWindowStartMs).UTC(), older)
	}

	if err := e.store.MarkCommitted(ctx, "held", "Payment", "other-worker", noon, time.Hour); err != nil {
		t.Fatal(err)
	}
	drain(t, sc, 3)
	if r := sc.Report(); r.OldestWindowStartMs != 0 || r.PendingRows != 0 || r.DirectoryOldestWindowStartMs != older.Start().UnixMilli() {
		t.Errorf("after the held step was done: %+v", r)
	}
}
