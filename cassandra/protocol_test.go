package cassandra_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

// maxOffset is the clock bound of these tests: the deleters stamp their deletes with it.
const maxOffset = 2 * time.Second

// behind is a writer whose clock lags the deleters' (the wall clock) by the whole bound: the
// oldest timestamps a writer within the bound can write.
func behind(st *cassandra.Store) *cassandra.Store {
	return st.WithWriteClock(clocktest.NewShifted(-maxOffset))
}

func TestCheckedDeletes(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	wr := behind(st)
	d := window.Date{Year: 2026, Month: time.October, Day: 9}
	w := window.Window{Day: d, Minute: 42, Length: 1}
	for _, write := range []func() error{
		func() error { return wr.InsertDay(ctx, d) },
		func() error { return wr.InsertWindow(ctx, w) },
		func() error { return wr.InsertInstance(ctx, w, "pod-1") },
		func() error { return wr.InsertBucket(ctx, w, "pod-1", 0) },
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	// Each level refuses while the level below holds a row.
	if ok, err := st.DeleteInstanceChecked(ctx, w, "pod-1", maxOffset); err != nil || ok {
		t.Fatalf("instance with a bucket deleted: %v, %v", ok, err)
	}
	if ok, err := st.DeleteWindowChecked(ctx, w, maxOffset); err != nil || ok {
		t.Fatalf("window with an instance deleted: %v, %v", ok, err)
	}
	if ok, err := st.DeleteDayChecked(ctx, d, maxOffset); err != nil || ok {
		t.Fatalf("day with a window deleted: %v, %v", ok, err)
	}
	if ok, _ := st.HasWindow(ctx, w); !ok {
		t.Fatal("refused delete removed the window")
	}
	// Bottom-up, each level goes once the level below is empty.
	if err := st.DeleteBucket(ctx, w, "pod-1", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.DeleteInstanceChecked(ctx, w, "pod-1", maxOffset); err != nil || !ok {
		t.Fatalf("instance without buckets: %v, %v", ok, err)
	}
	if ok, err := st.DeleteWindowChecked(ctx, w, maxOffset); err != nil || !ok {
		t.Fatalf("empty window: %v, %v", ok, err)
	}
	if ok, err := st.DeleteDayChecked(ctx, d, maxOffset); err != nil || !ok {
		t.Fatalf("empty day: %v, %v", ok, err)
	}
	if ok, _ := st.HasDay(ctx, d); ok {
		t.Fatal("day still there")
	}
}

func TestGuardStopsEveryStatement(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	expired := errors.New("lease expired")
	guarded := st.WithGuard(func(context.Context) error { return expired })
	d := window.Date{Year: 2026, Month: time.October, Day: 10}
	w := window.Window{Day: d, Minute: 1, Length: 1}
	before := st.Statements()
	checks := map[string]error{
		"insert":     guarded.InsertWindow(ctx, w),
		"delete":     guarded.DeleteWindow(ctx, w, time.Now()),
		"checkpoint": guarded.LowerWindowCheckpoint(ctx, d, 5),
	}
	_, checks["scan"] = guarded.ListWindows(ctx, d, 0)
	_, _, checks["page"] = guarded.ReadBucketPage(ctx, cassandraBucket(w), nil)
	for name, err := range checks {
		if !errors.Is(err, expired) {
			t.Errorf("%s: %v, want the guard's error", name, err)
		}
	}
	if n := st.Statements() - before; n != 0 {
		t.Fatalf("%d statements sent past a refusing guard", n)
	}
	if ok, _ := st.HasWindow(ctx, w); ok {
		t.Fatal("guarded insert reached Cassandra")
	}
}

// injectAt returns a Store whose guard runs fn just before the statement number n (1-based)
// that the Store sends: a deterministic way to put a late writer between a deleter's check
// and its delete, or between its delete and its second check.
func injectAt(st *cassandra.Store, n int, fn func()) *cassandra.Store {
	var calls int
	return st.WithGuard(func(context.Context) error {
		calls++
		if calls == n {
			fn()
		}
		return nil
	})
}

// Each checked delete, with a late writer whose clock lags the deleter's by the whole bound
// publishing bottom-up right before the delete (n=2, or 3 for a day whose check reads the
// checkpoint first) or right after it: the directory row survives the delete, so the late rows
// stay reachable, and the deleter reads it back and says it is not gone.
func TestCheckedDeletesRaceLateWriters(t *testing.T) {
	ctx := ctxT(t)
	d := window.Date{Year: 2026, Month: time.October, Day: 11}
	w := window.Window{Day: d, Minute: 300, Length: 1}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, phase := range []string{"before delete", "after delete"} {
		t.Run("instance "+phase, func(t *testing.T) {
			st := storetest.Store(t, 1)
			wr := behind(st)
			must(wr.InsertInstance(ctx, w, "pod-1")) // an instance whose buckets were all processed
			n := map[string]int{"before delete": 2, "after delete": 3}[phase]
			late := func() { // the late writer: tier 4 then tier 3
				must(wr.InsertBucket(ctx, w, "pod-1", 1<<24+7))
				must(wr.InsertInstance(ctx, w, "pod-1"))
			}
			gone, err := injectAt(st, n, late).DeleteInstanceChecked(ctx, w, "pod-1", maxOffset)
			if err != nil || gone {
				t.Fatalf("DeleteInstanceChecked = %v, %v; want kept", gone, err)
			}
			if in, _ := st.ListAllInstances(ctx, w, 0); len(in) != 1 {
				t.Fatal("instance marker lost to a late writer")
			}
		})
		t.Run("window "+phase, func(t *testing.T) {
			st := storetest.Store(t, 1)
			wr := behind(st)
			n := map[string]int{"before delete": 2, "after delete": 3}[phase]
			must(wr.InsertWindow(ctx, w)) // a window whose instances were all processed
			late := func() {              // tier 3 then tier 2
				must(wr.InsertInstance(ctx, w, "pod-2"))
				must(wr.InsertWindow(ctx, w))
			}
			gone, err := injectAt(st, n, late).DeleteWindowChecked(ctx, w, maxOffset)
			if err != nil || gone {
				t.Fatalf("DeleteWindowChecked = %v, %v; want kept", gone, err)
			}
			if ok, _ := st.HasWindow(ctx, w); !ok {
				t.Fatal("window row lost to a late writer")
			}
		})
		t.Run("day "+phase, func(t *testing.T) {
			st := storetest.Store(t, 1)
			wr := behind(st)
			n := map[string]int{"before delete": 3, "after delete": 4}[phase]
			must(wr.InsertDay(ctx, d))
			cp, _ := st.WindowCheckpoint(ctx, d)
			if _, err := st.SetWindowCheckpoint(ctx, d, cp, 900); err != nil { // Node-0 got far
				t.Fatal(err)
			}
			late := func() { // tier 2, window checkpoint, tier 1
				must(wr.InsertWindow(ctx, w))
				must(wr.LowerWindowCheckpoint(ctx, d, w.Minute))
				must(wr.InsertDay(ctx, d))
			}
			gone, err := injectAt(st, n, late).DeleteDayChecked(ctx, d, maxOffset)
			if err != nil || gone {
				t.Fatalf("DeleteDayChecked = %v, %v; want kept", gone, err)
			}
			if ok, _ := st.HasDay(ctx, d); !ok {
				t.Fatal("day row lost to a late writer")
			}
		})
	}
}

// The same interleaving against a check-then-delete stamped at the deleter's clock (the driver's
// default) loses the window: what the timestamp of a checked delete is for.
func TestDeleteStampedNowLosesToLateWriter(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	wr := behind(st)
	w := window.Window{Day: window.Date{Year: 2026, Month: time.October, Day: 12}, Minute: 5, Length: 1}
	if busy, err := st.HasInstances(ctx, w); err != nil || busy { // gate 1 passes
		t.Fatal(busy, err)
	}
	if err := wr.InsertInstance(ctx, w, "pod-3"); err != nil { // the late writer, bottom-up
		t.Fatal(err)
	}
	if err := wr.InsertWindow(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteWindow(ctx, w, time.Now()); err != nil { // the delete
		t.Fatal(err)
	}
	if ok, _ := st.HasWindow(ctx, w); ok {
		t.Fatal("expected the unchecked delete to hide the late write")
	}
}

// A delete's tombstone carries the timestamp it was given, in the statement, whatever clock
// stamps the Store's other writes: a row stamped after it survives, one stamped at it does not
// (the tombstone wins a tie). CheckedDeleteTime puts it max_clock_offset and a microsecond before
// the check's reading.
func TestDeleteCarriesItsTimestamp(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	w := window.Window{Day: window.Date{Year: 2026, Month: time.October, Day: 13}, Minute: 7, Length: 1}
	rowAt := time.Date(2026, time.October, 13, 0, 7, 30, 0, time.UTC)
	if err := st.WithWriteClock(clocktest.New(rowAt)).InsertWindow(ctx, w); err != nil {
		t.Fatal(err)
	}
	deleter := st.WithWriteClock(clocktest.New(rowAt.Add(time.Hour))) // its own clock plays no part
	if err := deleter.DeleteWindow(ctx, w, rowAt.Add(-time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.HasWindow(ctx, w); err != nil || !ok {
		t.Fatalf("a row stamped after the tombstone is gone: %v, %v", ok, err)
	}
	if err := deleter.DeleteWindow(ctx, w, rowAt); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.HasWindow(ctx, w); err != nil || ok {
		t.Fatalf("a row stamped at the tombstone survived: %v, %v", ok, err)
	}

	checkedAt := time.Date(2026, time.October, 13, 0, 8, 2, 700, time.UTC) // 700 ns past a µs
	got := cassandra.CheckedDeleteTime(checkedAt, maxOffset).UnixMicro()
	if want := checkedAt.UnixMicro() - maxOffset.Microseconds() - 1; got != want {
		t.Fatalf("CheckedDeleteTime = %d µs, want %d", got, want)
	}
}
