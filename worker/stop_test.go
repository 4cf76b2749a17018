package worker

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

var noon = time.Date(2026, time.March, 10, 12, 0, 10, 0, time.UTC)

// TestStopMidBucketLosesNothing stops a worker while it is half way through a bucket of 300 rows:
// the bucket stays whole, the rows under way finish and are COMMITTED, and a second worker runs
// exactly the rest. Nothing COMMITTED runs twice, nothing is lost.
func TestStopMidBucketLosesNothing(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 600)
	txs := ids("tx", 300)
	e.record("pod-a", w, 1000, txs...)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var n atomic.Int64
	first := &recordingExecutor{answer: func(Task, int) Outcome {
		if n.Add(1) == 50 {
			stop()
		}
		return Outcome{Kind: Done, Status: 204}
	}}
	cfg := e.config("w1")
	cfg.Concurrency = 8
	sc1 := e.scanner(cfg, e.guard(fullRing(), 0, 1, time.Hour), first)
	_, err := sc1.Cycle(ctx)
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("cycle of the stopped worker: %v, want ErrStopped", err)
	}
	s1 := sc1.Stats()
	if s1.Executed < 50 || s1.Executed >= 300 || s1.BucketsKept != 1 || s1.BucketsDeleted != 0 || s1.InstancesDeleted != 0 {
		t.Fatalf("stopped worker: %+v; want a kept, partial bucket", s1)
	}
	if got := e.count("es_retry_transactions_by_instance"); got != 300 {
		t.Fatalf("the kept bucket holds %d rows, want 300", got)
	}
	ran1 := first.runs()
	for id := range ran1 {
		if m, ok := e.marker(id); !ok || m.State != cassandra.MarkerCommitted {
			t.Fatalf("%s ran before the stop but its marker is %+v, %v", id, m, ok)
		}
	}

	second := &recordingExecutor{}
	sc2 := e.scanner(e.config("w2"), e.guard(fullRing(), 0, 1, time.Hour), second)
	s2 := drain(t, sc2, 3)
	ran2 := second.runs()
	for _, id := range txs {
		if ran1[id]+ran2[id] != 1 {
			t.Errorf("%s ran %d times before the stop and %d after, want once in all", id, ran1[id], ran2[id])
		}
	}
	if s2.SkippedCommitted != uint64(len(ran1)) {
		t.Errorf("second worker skipped %d COMMITTED rows, want %d", s2.SkippedCommitted, len(ran1))
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestRunStopsCleanly runs the worker's loop and cancels it: Run returns nil, and what it
// finished before is finished.
func TestRunStopsCleanly(t *testing.T) {
	e := newEnv(t, 1, noon)
	e.record("pod-a", e.win(window.DateOf(noon), 700), 10, ids("tx", 25)...)
	ex := &recordingExecutor{}
	cfg := e.config("w1")
	cfg.IdleBackoff = 10 * time.Millisecond
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, time.Hour), ex)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	deadline := time.After(time.Minute)
	for sc.Stats().WindowsDeleted == 0 {
		select {
		case <-deadline:
			t.Fatalf("Run did not drain the window: %+v", sc.Stats())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := len(ex.runs()); got != 25 {
		t.Fatalf("%d transactions ran, want 25", got)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestDisjointLeasesNeverShareAnInstance runs two workers at once, each with one half of the
// ring: each instance is executed by the worker whose half holds its token, never by the
// other, and only Node-0 deletes windows and days.
func TestDisjointLeasesNeverShareAnInstance(t *testing.T) {
	e := newEnv(t, 1, noon)
	today := window.DateOf(noon)
	halves := lease.Split(2)
	instances := ids("pod", 12)
	all := map[string]string{} // transaction -> instance
	for _, m := range []int{650, 651, 652} {
		w := e.win(today, m)
		for _, in := range instances {
			for _, id := range ids(w.String()+"/"+in, 4) {
				all[id] = in
			}
			e.record(in, w, 3, ids(w.String()+"/"+in, 4)...)
		}
	}
	var owners [2]int
	for _, in := range instances {
		if halves[0].Contains(cassandra.Token(in)) {
			owners[0]++
		} else {
			owners[1]++
		}
	}
	if owners[0] == 0 || owners[1] == 0 {
		t.Fatalf("instances fall in one half only (%v): pick other ids", owners)
	}

	var ex [2]*recordingExecutor
	var sc [2]*Scanner
	for i := range sc {
		ex[i] = &recordingExecutor{}
		sc[i] = e.scanner(e.config("w"+strconv.Itoa(i)), e.guard(lease.Ranges{halves[i]}, i, 2, time.Hour), ex[i])
	}
	// Both workers run their cycles at the same time until neither makes progress twice running.
	for round, idle := 0, 0; idle < 2; round++ {
		if round > 10 {
			t.Fatal("no quiescence after 10 rounds")
		}
		var wg sync.WaitGroup
		var progress atomic.Bool
		for i := range sc {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := sc[i].Cycle(context.Background())
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
				}
				if res.Progress() {
					progress.Store(true)
				}
			}(i)
		}
		wg.Wait()
		if progress.Load() {
			idle = 0
		} else {
			idle++
		}
	}

	runs := map[string]int{}
	for i := range ex {
		for _, task := range ex[i].all() {
			runs[task.TransactionID]++
			if !halves[i].Contains(cassandra.Token(task.InstanceID)) {
				t.Errorf("worker %d executed %s of instance %s, whose token %d is not in its lease %s",
					i, task.TransactionID, task.InstanceID, cassandra.Token(task.InstanceID), halves[i])
			}
		}
	}
	for id := range all {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want 1", id, runs[id])
		}
	}
	if s := sc[1].Stats(); s.WindowsDeleted != 0 || s.DaysDeleted != 0 {
		t.Errorf("worker 1 is not Node-0 but deleted %d windows and %d days", s.WindowsDeleted, s.DaysDeleted)
	}
	if s := sc[0].Stats(); s.WindowsDeleted != 3 {
		t.Errorf("Node-0 deleted %d windows, want 3", s.WindowsDeleted)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestExpiredLeaseStopsTheNextQuery lets the lease expire (on the manual clock) while an
// execution is under way: not one statement reaches Cassandra after that, the bucket is kept,
// and a renewed lease finishes the work.
func TestExpiredLeaseStopsTheNextQuery(t *testing.T) {
	e := newEnv(t, 1, noon)
	txs := ids("tx", 20)
	e.record("pod-a", e.win(window.DateOf(noon), 660), 1000, txs...)

	g := e.guard(fullRing(), 0, 1, time.Minute)
	var atExpiry atomic.Uint64
	var once sync.Once
	ex := &recordingExecutor{answer: func(Task, int) Outcome {
		once.Do(func() {
			e.clock.Advance(time.Minute) // the lease ends while this execution runs
			atExpiry.Store(e.store.Statements())
		})
		return Outcome{Kind: Done, Status: 200}
	}}
	cfg := e.config("w1")
	cfg.Concurrency = 1
	sc := e.scanner(cfg, g, ex)
	_, err := sc.Cycle(context.Background())
	if !errors.Is(err, lease.ErrLeaseExpired) {
		t.Fatalf("cycle: %v, want the guard's ErrLeaseExpired", err)
	}
	if after := e.store.Statements(); after != atExpiry.Load() {
		t.Fatalf("%d statements ran after the lease expired", after-atExpiry.Load())
	}
	s := sc.Stats()
	if s.Executed != 1 || s.GuardRefusals == 0 || s.BucketsKept != 1 || s.BucketsDeleted != 0 || s.InstancesDeleted != 0 {
		t.Fatalf("stats %+v; want one execution, a refusal, the bucket kept", s)
	}
	if got := e.count("es_retry_transactions_by_instance"); got != 20 {
		t.Fatalf("bucket holds %d rows, want 20", got)
	}

	// A new lease element (a later epoch) lets the work finish. The execution whose COMMITTED
	// marker the guard refused runs again: its marker says IN_PROGRESS, from a lease that ended.
	g.Set(lease.Lease{WorkerID: "w1", Ring: e.ring, Epoch: 2, Ranges: fullRing(), TTL: time.Hour, ValidFrom: e.clock.Now()})
	drain(t, sc, 3)
	runs := ex.runs()
	for _, id := range txs {
		if runs[id] < 1 {
			t.Errorf("%s never ran", id)
		}
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestAnotherWorkersLiveMarkerHoldsTheStep: a step whose IN_PROGRESS marker another worker wrote
// (and that has not expired) is not executed; its bucket is kept until the marker says
// COMMITTED, and then the step is skipped for good.
func TestAnotherWorkersLiveMarkerHoldsTheStep(t *testing.T) {
	e := newEnv(t, 1, noon)
	e.record("pod-a", e.win(window.DateOf(noon), 610), 10, "held", "free")
	ctx := context.Background()
	if err := e.store.MarkInProgress(ctx, "held", "Payment", "other-worker", noon, time.Hour); err != nil {
		t.Fatal(err)
	}
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	if _, err := sc.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if s := sc.Stats(); s.SkippedInProgress != 1 || s.Executed != 1 || s.BucketsKept != 1 || s.BucketsDeleted != 0 {
		t.Fatalf("with a live marker of another worker: %+v", s)
	}
	if err := e.store.MarkCommitted(ctx, "held", "Payment", "other-worker", noon, time.Hour); err != nil {
		t.Fatal(err)
	}
	drain(t, sc, 3)
	if runs := ex.runs(); runs["held"] != 0 || runs["free"] != 1 {
		t.Fatalf("runs %v; want held never run by w0, free once", runs)
	}
	e.assertDrained(DefaultMaxClockOffset)
}
