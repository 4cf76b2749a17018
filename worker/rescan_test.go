package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// TestRescansCountOnlyTokensNotCoveredBefore: the first cycle of a process counts every visit
// (start); later a visit counts only in ranges gained since the window's last visit, and a window
// new to the process is compared with the ranges of the cycle before.
func TestRescansCountOnlyTokensNotCoveredBefore(t *testing.T) {
	low := lease.Ranges{{Start: lease.MinToken, End: -1}}
	high := lease.Ranges{{Start: 0, End: lease.MaxToken}}
	w1, err := window.New(window.DateOf(noon), 660, 1)
	if err != nil {
		t.Fatal(err)
	}
	w2 := w1.Next()
	var r rescans

	gained, start := r.window(w1, low)
	if !start || !gained.Equal(low) {
		t.Fatalf("first visit: gained %v start %v, want %v and start", gained, start, low)
	}
	gained, start = r.window(w2, low) // same first cycle: still the start
	if !start || !gained.Equal(low) {
		t.Fatalf("second window of the first cycle: gained %v start %v, want %v and start", gained, start, low)
	}
	r.cycleEnded(nil, false)

	if gained, start = r.window(w1, low); start || !gained.Empty() {
		t.Fatalf("same ranges again: gained %v start %v, want none", gained, start)
	}
	full := low.Union(high)
	if gained, _ = r.window(w2, full); !gained.Equal(high) {
		t.Fatalf("after a handover of the high half: gained %v, want %v", gained, high)
	}
	r.cycleEnded(nil, false)

	w3 := w2.Next() // new to the process: compared with the last ranges of the cycle before
	if gained, _ = r.window(w3, full); !gained.Empty() {
		t.Fatalf("a new window under unchanged ranges: gained %v, want none", gained)
	}
	if gained, _ = r.window(w1, full); !gained.Equal(high) {
		t.Fatalf("w1, last visited under the low half: gained %v, want %v", gained, high)
	}
	r.cycleEnded(nil, false)
	r.cycleEnded(nil, false) // a cycle that visited nothing forgets every window
	if len(r.covered) != 0 || !r.started || !r.last.Equal(full) {
		t.Fatalf("after an empty cycle: covered %v started %v last %v", r.covered, r.started, r.last)
	}

	// A process whose first cycles held a lease but found no window: a window that appears later
	// under the same ranges is no re-scan, neither after a start nor after a handover.
	var idle rescans
	idle.cycleEnded(low, true)
	if gained, start = idle.window(w1, low); start || !gained.Empty() {
		t.Fatalf("a new window after an idle cycle under the same ranges: gained %v start %v, want none", gained, start)
	}
	idle.cycleEnded(nil, false)
	idle.cycleEnded(full, true)
	if gained, start = idle.window(w2, full); start || !gained.Empty() {
		t.Fatalf("a new window after an idle cycle under ranges gained before it: gained %v start %v, want none", gained, start)
	}
}

// TestInstancesRescannedAfterAHandoverAndAStart: a worker holding the low half of the ring drains
// its instances (visits after its start); a handover gives it the whole ring, and its next cycle
// visits the high half's instances as re-scans after the handover; a new Scanner (a restart)
// counts its first visits as after its start.
func TestInstancesRescannedAfterAHandoverAndAStart(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 660)
	var lowPods, highPods []string
	for i := 0; len(lowPods) < 2 || len(highPods) < 3; i++ {
		pod := fmt.Sprintf("pod-%d", i)
		if cassandra.Token(pod) < 0 {
			if len(lowPods) < 2 {
				lowPods = append(lowPods, pod)
			}
		} else if len(highPods) < 3 {
			highPods = append(highPods, pod)
		}
	}
	for _, pod := range append(lowPods, highPods...) {
		e.record(pod, w, 1000, pod+"-tx")
	}
	low := lease.Ranges{{Start: lease.MinToken, End: -1}}
	g := e.guard(low, 0, 2, time.Minute)
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w1"), g, ex)
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatalf("cycle on the low half: %v", err)
	}
	s := sc.Stats()
	if s.InstancesScanned != 2 || s.InstancesRescannedStart != 2 || s.InstancesRescannedHandover != 0 {
		t.Fatalf("after the first cycle: scanned %d, rescanned after start %d, after a handover %d; want 2, 2, 0",
			s.InstancesScanned, s.InstancesRescannedStart, s.InstancesRescannedHandover)
	}

	g.Set(lease.Lease{WorkerID: "w1", Ring: e.ring, NodeIndex: 0, NodeCount: 1, Epoch: 2,
		Ranges: fullRing(), TTL: time.Minute, ValidFrom: e.clock.Now()})
	before := sc.Stats()
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatalf("cycle on the whole ring: %v", err)
	}
	s = sc.Stats().Sub(before)
	if s.InstancesScanned != 3 || s.InstancesRescannedStart != 0 || s.InstancesRescannedHandover != 3 {
		t.Fatalf("after the handover: scanned %d, rescanned after start %d, after a handover %d; want 3, 0, 3",
			s.InstancesScanned, s.InstancesRescannedStart, s.InstancesRescannedHandover)
	}

	e.record("pod-late", w.Next(), 1000, "pod-late-tx")
	restarted := e.scanner(e.config("w1"), g, ex)
	if _, err := restarted.Cycle(context.Background()); err != nil {
		t.Fatalf("cycle of the restarted scanner: %v", err)
	}
	if s := restarted.Stats(); s.InstancesScanned != 1 || s.InstancesRescannedStart != 1 || s.InstancesRescannedHandover != 0 {
		t.Fatalf("restarted: scanned %d, rescanned after start %d, after a handover %d; want 1, 1, 0",
			s.InstancesScanned, s.InstancesRescannedStart, s.InstancesRescannedHandover)
	}
	if n := len(ex.all()); n != 6 {
		t.Fatalf("%d executions, want 6 (each step once)", n)
	}
}
