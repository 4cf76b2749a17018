package worker

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
)

// newYear is the clock of the round-trip test: half past midnight on New Year's Day, so that the
// directory spans two years, a midnight, and a day older than the lookback.
var newYear = time.Date(2026, time.January, 1, 0, 30, 10, 0, time.UTC)

// TestDrainRoundTrip records failures of several instances through the recorder into windows
// across midnight and New Year and into a day older than the lookback, in small buckets (and one
// bucket larger than a page), drains them with one worker holding the whole ring as Node-0, and
// checks that every failure ran exactly once and the directory is left as invariant 8 says.
func TestDrainRoundTrip(t *testing.T) {
	e := newEnv(t, 1, newYear)
	dec31 := window.Date{Year: 2025, Month: time.December, Day: 31}
	jan1 := window.Date{Year: 2026, Month: time.January, Day: 1}
	old := window.Date{Year: 2025, Month: time.December, Day: 20} // 12 days back; lookback is 2
	targets := []window.Window{
		e.win(old, 600),
		e.win(dec31, 1438), e.win(dec31, 1439),
		e.win(jan1, 0), e.win(jan1, 1),
		e.win(jan1, 30), // the window the clock is in: readable, but its time has not passed
	}
	instances := []string{"pod-a", "pod-b", "pod-c", "pod-d", "pod-e"}
	want := map[string]bool{}
	buckets := 0
	for wi, w := range targets {
		for ii, in := range instances {
			n := 1 + (wi+ii)%7 // 1..7 rows in buckets of 3
			txs := ids(w.String()+"/"+in, n)
			e.record(in, w, 3, txs...)
			buckets += (n + 2) / 3
			for _, id := range txs {
				want[id] = true
			}
		}
	}
	big := ids("big", 250) // one bucket of 250 rows: three pages of 100
	e.record("pod-big", e.win(dec31, 1439), 1000, big...)
	buckets++
	for _, id := range big {
		want[id] = true
	}

	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	got := drain(t, sc, 5)
	t.Logf("drain: %+v", got)

	runs := ex.runs()
	for id := range want {
		if runs[id] != 1 {
			t.Errorf("%s ran %d times, want 1", id, runs[id])
		}
	}
	if len(runs) != len(want) {
		t.Errorf("%d transactions ran, %d were recorded", len(runs), len(want))
	}
	if got.Done != uint64(len(want)) || got.BucketsDeleted != uint64(buckets) ||
		got.InstancesDeleted != uint64(len(targets)*len(instances)+1) || got.BucketsKept != 0 {
		t.Errorf("stats %+v; want %d done, %d buckets deleted, %d instances deleted", got, len(want), buckets, len(targets)*len(instances)+1)
	}
	for _, task := range ex.all() {
		if task.Region != e.ring.Region || task.ServiceName != e.ring.Service || task.WorkerID != "w0" ||
			task.LeaseEpoch != 1 || task.ImplType != "Payment" || task.AllocationKey != "k-"+task.TransactionID {
			t.Fatalf("task %+v does not carry its row and lease", task)
		}
	}
	if m, ok := e.marker(big[7]); !ok || m.State != cassandra.MarkerCommitted || m.Owner != "w0" {
		t.Errorf("marker of %s = %+v, %v; want COMMITTED by w0", big[7], m, ok)
	}

	e.assertDrained(DefaultMaxClockOffset)
	if ws := e.windowsLeft(); len(ws) != 1 || ws[0] != e.win(jan1, 30) {
		t.Errorf("tier 2 holds %v, want only the open window %s", ws, e.win(jan1, 30))
	}
	if ds := e.daysLeft(); len(ds) != 1 || ds[0] != jan1 {
		t.Errorf("tier 1 holds %v, want only %s", ds, jan1)
	}

	// The scans of the next cycles start at the checkpoints Node-0 raised: they read no
	// tombstones of the windows and days it deleted.
	tt := cassandra.NewTombstoneTracer(e.session)
	traced := e.store.Traced(tt)
	ctx := context.Background()
	for _, d := range []window.Date{old, dec31, jan1} {
		if _, _, err := traced.ListLiveWindows(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := tt.Stats(ctx); err != nil || st.Tombstones != 0 {
		t.Errorf("tier-2 scans after the drain: %+v, %v; want no tombstone", st, err)
	}
	tt.Reset()
	for _, y := range []int{2025, 2026} {
		if _, _, err := traced.ListLiveDays(ctx, y); err != nil {
			t.Fatal(err)
		}
	}
	// 2025's checkpoint cannot move past December 31st (a checkpoint names a day of its year):
	// that one row tombstone is all a scan of tier 1 reads.
	if st, err := tt.Stats(ctx); err != nil || st.Tombstones > 1 {
		t.Errorf("tier-1 scans after the drain: %+v, %v; want at most one tombstone", st, err)
	}

	// Once the open window's time has passed and the day is over, both go.
	e.clock.Set(time.Date(2026, time.January, 2, 0, 0, 3, 0, time.UTC))
	sc2 := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	drain(t, sc2, 3)
	e.assertDrained(DefaultMaxClockOffset)
	if ws, ds := e.windowsLeft(), e.daysLeft(); len(ws) != 0 || len(ds) != 0 {
		t.Errorf("after the day: tier 2 %v, tier 1 %v; want both empty", ws, ds)
	}
}
