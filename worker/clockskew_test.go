package worker

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// TestLaggingWriterLosesNothing: a writer whose clock lags by less than max_clock_offset keeps
// writing into a window until shortly after the window started by the true clock. The worker
// (true clock) cycles all along, reading and compacting each window as soon as it is readable;
// every failure either writer recorded still runs exactly once.
func TestLaggingWriterLosesNothing(t *testing.T) {
	off := DefaultMaxClockOffset
	w0, err := window.Of(noon, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 1, w0.Start().Add(-3*time.Second))
	writers := map[string]*recorder.Recorder{}
	for id, lag := range map[string]time.Duration{"pod-lagging": off - 50*time.Millisecond, "pod-punctual": 0} {
		rec, err := uncheckedRecorder(e.store, recorder.Config{InstanceID: id, Clock: lagging{e.clock, lag}})
		if err != nil {
			t.Fatal(err)
		}
		writers[id] = rec
	}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), &recordingExecutor{})
	ex := sc.exec.(*recordingExecutor)

	ctx := context.Background()
	recorded := map[string]window.Window{}
	n := 0
	// From 3 s before w0 starts to 5 s after, every 100 ms: each writer records, then the
	// worker cycles.
	for e.clock.Now().Before(w0.Start().Add(5 * time.Second)) {
		for id, rec := range writers {
			tx := id + "-" + e.clock.Now().Format("05.000")
			key, err := rec.Record(ctx, recorder.Failure{TransactionID: tx, ImplType: "Payment"})
			if err != nil {
				t.Fatalf("record %s: %v", tx, err)
			}
			recorded[tx] = key.Window
			n++
		}
		if _, err := sc.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(100 * time.Millisecond)
	}
	intoW0 := 0
	for _, w := range recorded {
		if w == w0 {
			intoW0++
		}
	}
	if intoW0 == 0 {
		t.Fatalf("no failure was recorded into %s; the test proves nothing", w0)
	}
	if sc.Stats().InstancesDeleted == 0 {
		t.Fatalf("the worker never finished an instance while the writers wrote: %+v", sc.Stats())
	}

	e.clock.Advance(3 * time.Minute)
	drain(t, sc, 5)
	runs := ex.runs()
	for tx, w := range recorded {
		if runs[tx] != 1 {
			t.Errorf("%s (recorded into %s) ran %d times, want 1", tx, w, runs[tx])
		}
	}
	if len(runs) != n {
		t.Errorf("%d transactions ran, %d were recorded", len(runs), n)
	}
	e.assertDrained(off)
}
