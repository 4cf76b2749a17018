package worker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// instanceIn returns an instance id whose token lies in r.
func instanceIn(t *testing.T, r lease.Range, prefix string) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		id := prefix + "-" + strconv.Itoa(i)
		if r.Contains(cassandra.Token(id)) {
			return id
		}
	}
	t.Fatalf("no instance id in %s", r)
	return ""
}

// TestNode0KeepsAWindowASlowPeerStillWorksOn: Node-0 drains its own instance of a window, but
// the window keeps a marker of an instance in the other worker's range (gate 1), so Node-0 does
// not delete the window, nor its day, until that peer has finished.
func TestNode0KeepsAWindowASlowPeerStillWorksOn(t *testing.T) {
	e := newEnv(t, 1, noon)
	halves := lease.Split(2)
	mine, theirs := instanceIn(t, halves[0], "pod"), instanceIn(t, halves[1], "pod")
	yesterday := window.DateOf(noon).AddDays(-1)
	w := e.win(yesterday, 900)
	e.record(mine, w, 10, ids("mine", 5)...)
	e.record(theirs, w, 10, ids("theirs", 40)...)

	node0 := e.scanner(e.config("w0"), e.guard(lease.Ranges{halves[0]}, 0, 2, time.Hour), &recordingExecutor{})
	drain(t, node0, 3)
	if s := node0.Stats(); s.Done != 5 || s.InstancesDeleted != 1 || s.WindowsDeleted != 0 || s.DaysDeleted != 0 {
		t.Fatalf("Node-0 alone: %+v; want its 5 rows done and the window kept", s)
	}
	if ws := e.windowsLeft(); len(ws) != 1 || ws[0] != w {
		t.Fatalf("tier 2 holds %v, want %s kept for the slow peer", ws, w)
	}
	if ds := e.daysLeft(); len(ds) != 1 || ds[0] != yesterday {
		t.Fatalf("tier 1 holds %v, want %s kept", ds, yesterday)
	}

	peer := e.scanner(e.config("w1"), e.guard(lease.Ranges{halves[1]}, 1, 2, time.Hour), &recordingExecutor{})
	drain(t, peer, 3)
	if s := peer.Stats(); s.Done != 40 || s.WindowsDeleted != 0 {
		t.Fatalf("peer: %+v; want its 40 rows done and no directory delete", s)
	}
	drain(t, node0, 3)
	if s := node0.Stats(); s.WindowsDeleted != 1 || s.DaysDeleted != 1 {
		t.Fatalf("Node-0 after the peer: %+v; want the window and the day deleted", s)
	}
	e.assertDrained(DefaultMaxClockOffset)
	if ws, ds := e.windowsLeft(), e.daysLeft(); len(ws) != 0 || len(ds) != 0 {
		t.Fatalf("tier 2 %v, tier 1 %v; want both empty", ws, ds)
	}
}

// TestNode0KeepsAWindowWhoseTimeHasNotPassed: a window is readable from its start plus the
// offset, and drained then, but Node-0 deletes it only once the clock is past its end plus the
// offset (gate 2), not a nanosecond sooner.
func TestNode0KeepsAWindowWhoseTimeHasNotPassed(t *testing.T) {
	w, err := window.Of(noon, 1)
	if err != nil {
		t.Fatal(err)
	}
	off := DefaultMaxClockOffset
	e := newEnv(t, 1, w.Start().Add(off)) // the first instant w is readable
	e.record("pod-a", w, 10, ids("tx", 3)...)
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), &recordingExecutor{})

	drain(t, sc, 3)
	if s := sc.Stats(); s.Done != 3 || s.InstancesDeleted != 1 || s.WindowsDeleted != 0 {
		t.Fatalf("%+v; want the window drained but kept", s)
	}
	e.clock.Set(w.End().Add(off - time.Nanosecond))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ws := e.windowsLeft(); len(ws) != 1 || ws[0] != w || sc.Stats().WindowsDeleted != 0 {
		t.Fatalf("1ns before its end plus the offset, tier 2 holds %v; want %s kept", ws, w)
	}
	e.clock.Set(w.End().Add(off))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ws := e.windowsLeft(); len(ws) != 0 || sc.Stats().WindowsDeleted != 1 {
		t.Fatalf("at its end plus the offset, tier 2 holds %v; want it deleted", ws)
	}
	if ds := e.daysLeft(); len(ds) != 1 {
		t.Fatalf("tier 1 holds %v; today is not over and must stay", ds)
	}
	e.assertDrained(off)
}

// TestNode0KeepsTheCheckpointAtAnOlderBusyWindow: an older window that passed gate 2 still has a
// slow peer's instance marker (gate 1) and a newer window of the same day has not passed gate 2.
// Node-0 must leave the day's scan checkpoint at the older window: raising it to the newer one
// would hide the older window from every later traversal, and its rows would never run.
func TestNode0KeepsTheCheckpointAtAnOlderBusyWindow(t *testing.T) {
	newer, err := window.Of(noon, 1)
	if err != nil {
		t.Fatal(err)
	}
	older := e0(t, newer)
	e := newEnv(t, 1, newer.Start().Add(DefaultMaxClockOffset)) // newer is readable, not deletable
	halves := lease.Split(2)
	mine, theirs := instanceIn(t, halves[0], "pod"), instanceIn(t, halves[1], "pod")
	e.record(theirs, older, 10, ids("slow", 4)...) // the peer has not drained it yet
	e.record(mine, newer, 10, ids("new", 3)...)

	node0 := e.scanner(e.config("w0"), e.guard(lease.Ranges{halves[0]}, 0, 2, time.Hour), &recordingExecutor{})
	drain(t, node0, 3)
	if ws := e.windowsLeft(); len(ws) != 2 || ws[0] != older {
		t.Fatalf("tier 2 holds %v, want %s (busy) and %s (not over)", ws, older, newer)
	}

	ex := &recordingExecutor{}
	peer := e.scanner(e.config("w1"), e.guard(lease.Ranges{halves[1]}, 1, 2, time.Hour), ex)
	drain(t, peer, 3)
	if runs := ex.runs(); len(runs) != 4 {
		t.Fatalf("the peer ran %d of the older window's 4 rows: %v", len(runs), runs)
	}
}

// e0 is the window ten minutes before w, on the same day.
func e0(t *testing.T, w window.Window) window.Window {
	t.Helper()
	o, err := window.New(w.Day, w.Minute-10, 1)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
