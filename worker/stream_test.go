package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// pageSpy is a Store that reports every bucket page read.
type pageSpy struct {
	*cassandra.Store
	onPage func()
}

func (p pageSpy) ReadBucketPage(ctx context.Context, b cassandra.BucketKey, state []byte) ([]cassandra.Transaction, []byte, error) {
	p.onPage()
	return p.Store.ReadBucketPage(ctx, b, state)
}

// TestBucketIsStreamedWithBackpressure: a bucket of 450 rows is read a page (100 rows) at a time,
// the next page only once the current one is dispatched, and never more than Concurrency rows
// execute at once.
func TestBucketIsStreamedWithBackpressure(t *testing.T) {
	e := newEnv(t, 1, noon)
	e.record("pod-a", e.win(window.DateOf(noon), 600), 1000, ids("tx", 450)...)

	const concurrency = 5
	var mu sync.Mutex
	started, running, maxRunning := 0, 0, 0
	var atPage []int
	ex := &recordingExecutor{answer: func(Task, int) Outcome {
		mu.Lock()
		started++
		running++
		maxRunning = max(maxRunning, running)
		mu.Unlock()
		time.Sleep(time.Millisecond) // let executions overlap
		mu.Lock()
		running--
		mu.Unlock()
		return Outcome{Kind: Done, Status: 200}
	}}
	spy := pageSpy{Store: e.store, onPage: func() {
		mu.Lock()
		atPage = append(atPage, started)
		mu.Unlock()
	}}
	cfg := e.config("w0")
	cfg.Concurrency = concurrency
	sc, err := New(cfg, spy, e.guard(fullRing(), 0, 1, time.Hour), ex)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, sc, 3)

	if len(ex.runs()) != 450 {
		t.Fatalf("%d rows ran, want 450", len(ex.runs()))
	}
	if maxRunning > concurrency {
		t.Errorf("%d executions ran at once, concurrency is %d", maxRunning, concurrency)
	}
	if len(atPage) < 5 {
		t.Fatalf("%d page reads for 450 rows in pages of 100", len(atPage))
	}
	for i, n := range atPage[:5] {
		// Page i is read after pages 0..i-1 (100 rows each) were dispatched, of which at most
		// `concurrency` may not have reached the executor yet; and before any row of page i ran.
		if n < i*100-concurrency || n > i*100 {
			t.Errorf("page %d read after %d executions started, want %d..%d", i, n, i*100-concurrency, i*100)
		}
	}
}

// TestLookbackDayMissingFromTier1IsStillDrained: a day within the lookback is visited even when
// its tier-1 row is gone.
func TestLookbackDayMissingFromTier1IsStillDrained(t *testing.T) {
	e := newEnv(t, 1, noon)
	yesterday := window.DateOf(noon).AddDays(-1)
	e.record("pod-a", e.win(yesterday, 1000), 10, ids("tx", 4)...)
	if err := e.store.DeleteDay(context.Background(), yesterday, time.Now()); err != nil {
		t.Fatal(err)
	}
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	drain(t, sc, 3)
	if got := len(ex.runs()); got != 4 {
		t.Fatalf("%d rows ran, want 4", got)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestLateWriteBelowTheCheckpointIsFound: Node-0 raised the day's window checkpoint past the
// windows it deleted; an import then writes into an earlier window of that day (the recorder's
// late protocol lowers the checkpoint), and the next cycles find and drain it.
func TestLateWriteBelowTheCheckpointIsFound(t *testing.T) {
	e := newEnv(t, 1, noon)
	today := window.DateOf(noon)
	e.record("pod-a", e.win(today, 600), 10, ids("first", 3)...)
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	drain(t, sc, 3)
	cp, err := e.store.WindowCheckpoint(context.Background(), today)
	if err != nil || cp.Minute != 601 {
		t.Fatalf("window checkpoint after the drain: %+v, %v; want 601", cp, err)
	}

	// An import of a legacy queue: failures backdated into 09:00 of the same day.
	rec, err := uncheckedRecorder(e.store, recorder.Config{InstanceID: "importer", Backdate: noon.Sub(e.win(today, 540).Start()) + time.Minute, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids("late", 3) {
		key, err := rec.Record(context.Background(), recorder.Failure{TransactionID: id, ImplType: "Payment"})
		if err != nil {
			t.Fatal(err)
		}
		if key.Window.Minute >= 601 {
			t.Fatalf("backdated write landed in %s, not below the checkpoint", key.Window)
		}
	}
	drain(t, sc, 3)
	runs := ex.runs()
	for _, id := range append(ids("first", 3), ids("late", 3)...) {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want 1", id, runs[id])
		}
	}
	e.assertDrained(DefaultMaxClockOffset)
}
