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

// racingStore lands a late write (an import into a past window, through the recorder's late
// protocol) just before the first delete of each kind: the worst interleaving for a delete.
type racingStore struct {
	*cassandra.Store
	t    *testing.T
	e    *env
	once map[string]*sync.Once
	late map[string]string // kind -> transaction written by the race
}

func (r racingStore) lateWrite(kind, instance string, w window.Window) {
	r.once[kind].Do(func() {
		now := r.e.clock.Now()
		rec, err := uncheckedRecorder(r.e.store, recorder.Config{
			InstanceID: instance, Clock: r.e.clock, Backdate: now.Sub(w.Start()) + 30*time.Second,
		})
		if err != nil {
			r.t.Error(err)
			return
		}
		key, err := rec.Record(context.Background(), recorder.Failure{TransactionID: r.late[kind], ImplType: "Payment"})
		if err != nil || key.Window != w {
			r.t.Errorf("late write into %s landed in %s: %v", w, key.Window, err)
		}
	})
}

func (r racingStore) DeleteInstance(ctx context.Context, w window.Window, id string, at time.Time) error {
	r.lateWrite("instance", id, w) // the same instance writes again into the window being drained
	return r.Store.DeleteInstance(ctx, w, id, at)
}

func (r racingStore) DeleteWindow(ctx context.Context, w window.Window, at time.Time) error {
	r.lateWrite("window", "pod-import", w)
	return r.Store.DeleteWindow(ctx, w, at)
}

func (r racingStore) DeleteDay(ctx context.Context, d window.Date, at time.Time) error {
	w, err := window.New(d, 30, r.e.length)
	if err != nil {
		r.t.Error(err)
	}
	r.lateWrite("day", "pod-import2", w)
	return r.Store.DeleteDay(ctx, d, at)
}

// TestLateWritesRacingDeletesAreNotLost: a late write whose directory rows land between the check
// and the delete of its instance marker, window or day, from a writer whose clock lags by the
// whole bound: the delete's timestamp spares them, Node-0 reads its window and day back and
// keeps them, and the late failures run.
func TestLateWritesRacingDeletesAreNotLost(t *testing.T) {
	e := newEnv(t, 1, noon)
	yesterday := window.DateOf(noon).AddDays(-1)
	e.record("pod-a", e.win(yesterday, 600), 10, ids("tx", 3)...)
	rs := racingStore{
		Store: e.store, t: t, e: e,
		once: map[string]*sync.Once{"instance": {}, "window": {}, "day": {}},
		late: map[string]string{"instance": "late-instance", "window": "late-window", "day": "late-day"},
	}
	ex := &recordingExecutor{}
	sc, err := New(e.config("w0"), rs, e.guard(fullRing(), 0, 1, time.Hour), ex)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, sc, 10)
	runs := ex.runs()
	for _, id := range append(ids("tx", 3), "late-instance", "late-window", "late-day") {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want 1", id, runs[id])
		}
	}
	if s := sc.Stats(); s.Outlived != 2 {
		t.Errorf("%d directory rows outlived their delete, want 2 (window, day): %+v", s.Outlived, s)
	}
	e.assertDrained(DefaultMaxClockOffset)
}
