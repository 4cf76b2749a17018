package cassandra_test

import (
	"slices"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

func TestWindowCheckpointCAS(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	d := window.Date{Year: 2026, Month: time.April, Day: 1}

	cp, err := st.WindowCheckpoint(ctx, d)
	if err != nil || cp.Exists || cp.Minute != 0 {
		t.Fatalf("missing checkpoint = %+v, %v", cp, err)
	}
	// Node-0 raises from the version it read.
	if ok, err := st.SetWindowCheckpoint(ctx, d, cp, 10); err != nil || !ok {
		t.Fatalf("first raise = %v, %v", ok, err)
	}
	// A second raise from the same (stale) read fails.
	if ok, err := st.SetWindowCheckpoint(ctx, d, cp, 20); err != nil || ok {
		t.Fatalf("stale insert = %v, %v", ok, err)
	}
	cp, _ = st.WindowCheckpoint(ctx, d)
	if !cp.Exists || cp.Minute != 10 {
		t.Fatalf("checkpoint = %+v, want 10", cp)
	}
	// A late writer into minute 30 (above the bound) changes no value but bumps the version,
	// so that a Node-0 raise computed from a scan before the write fails.
	if err := st.LowerWindowCheckpoint(ctx, d, 30); err != nil {
		t.Fatal(err)
	}
	after, _ := st.WindowCheckpoint(ctx, d)
	if after.Minute != 10 || after.Version == cp.Version {
		t.Fatalf("lower above the bound: %+v (was %+v)", after, cp)
	}
	if ok, _ := st.SetWindowCheckpoint(ctx, d, cp, 40); ok {
		t.Fatal("a raise from a version older than a late write was applied")
	}
	// A late writer below the bound lowers it.
	if err := st.LowerWindowCheckpoint(ctx, d, 3); err != nil {
		t.Fatal(err)
	}
	if cp, _ := st.WindowCheckpoint(ctx, d); cp.Minute != 3 {
		t.Fatalf("after lowering to 3: %+v", cp)
	}
	// A late writer into a day without a checkpoint creates it at its minute... or lower.
	d2 := d.AddDays(1)
	if err := st.LowerWindowCheckpoint(ctx, d2, 700); err != nil {
		t.Fatal(err)
	}
	if cp, _ := st.WindowCheckpoint(ctx, d2); !cp.Exists || cp.Minute != 0 {
		t.Fatalf("late write into a day without checkpoint: %+v, want minute 0", cp)
	}
}

func TestDayCheckpointCAS(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	cp, err := st.DayCheckpoint(ctx, 2026)
	if err != nil || cp.Exists || cp.Date != window.FirstOfYear(2026) {
		t.Fatalf("missing = %+v, %v", cp, err)
	}
	mar := window.Date{Year: 2026, Month: time.March, Day: 5}
	if ok, err := st.SetDayCheckpoint(ctx, 2026, cp, mar); err != nil || !ok {
		t.Fatalf("raise = %v, %v", ok, err)
	}
	for _, d := range []window.Date{{Year: 2026, Month: time.March, Day: 1}, mar, {Year: 2026, Month: time.June, Day: 1}} {
		if err := st.InsertDay(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	days, cp, err := st.ListLiveDays(ctx, 2026)
	if err != nil || cp.Date != mar || len(days) != 2 {
		t.Fatalf("live days = %v from %+v, %v", days, cp, err)
	}
	feb := window.Date{Year: 2026, Month: time.February, Day: 1}
	if err := st.LowerDayCheckpoint(ctx, feb); err != nil {
		t.Fatal(err)
	}
	days, cp, _ = st.ListLiveDays(ctx, 2026)
	if cp.Date != feb || len(days) != 3 {
		t.Fatalf("after lowering: %v from %+v", days, cp)
	}
}

// The reason for checkpoints: Node-0 deletes window rows one by one, and each is a row
// tombstone that a scan from minute 0 reads again. A scan from the checkpoint reads none.
func TestCheckpointKeepsScansOffTombstones(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	d := window.Date{Year: 2026, Month: time.May, Day: 1}
	for m := range 300 {
		if err := st.InsertWindow(ctx, window.Window{Day: d, Minute: m, Length: 1}); err != nil {
			t.Fatal(err)
		}
	}
	cp, _ := st.WindowCheckpoint(ctx, d)
	for m := range 250 {
		if err := st.DeleteWindow(ctx, window.Window{Day: d, Minute: m, Length: 1}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := st.SetWindowCheckpoint(ctx, d, cp, 250); err != nil || !ok {
		t.Fatalf("raise: %v, %v", ok, err)
	}

	s, _ := storetest.Keyspace(t)
	tt := cassandra.NewTombstoneTracer(s)
	ws, _, err := st.Traced(tt).ListLiveWindows(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 50 || ws[0].Minute != 250 {
		t.Fatalf("live windows: %d from %v", len(ws), ws[:1])
	}
	stats, err := tt.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scan from checkpoint: %+v", stats)
	if stats.Traces == 0 || stats.LiveRows < 50 {
		t.Fatalf("trace did not see the scan: %+v", stats)
	}
	if stats.Tombstones != 0 {
		t.Fatalf("scan from the checkpoint read %d tombstones, want 0", stats.Tombstones)
	}

	tt.Reset()
	if _, err := st.Traced(tt).ListWindows(ctx, d, 0); err != nil {
		t.Fatal(err)
	}
	full, err := tt.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scan from minute 0: %+v", full)
	if full.Tombstones < 250 {
		t.Fatalf("scan from 0 read %d tombstones; the test no longer shows what checkpoints avoid", full.Tombstones)
	}
	if got := []int{ws[0].Minute, ws[len(ws)-1].Minute}; !slices.Equal(got, []int{250, 299}) {
		t.Fatalf("live windows span %v", got)
	}
}
