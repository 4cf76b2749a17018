package coordinator

import (
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease/minimal"
)

// TestDecideHandOnsWaitsTheReturnDelay: a reserved slot of a minimal-mode ring is handed on once
// the leader has seen it reserved for the return delay, decided on the ring's generation; not
// before (it wakes then), and not while no eligible member could take it, though its delay runs.
func TestDecideHandOnsWaitsTheReturnDelay(t *testing.T) {
	s := twoMembers(t)
	apply(t, s, &fsm.SetMovement{Ring: testRing, Mode: fsm.ModeMinimal},
		&fsm.Down{Ring: testRing, WorkerID: "b", Incarnation: "b-1"})
	firstSeen := map[string]time.Time{}
	seenAt := func(now time.Time) func(fsm.Slot) time.Time {
		return func(sl fsm.Slot) time.Time {
			if _, ok := firstSeen[sl.WorkerID]; !ok {
				firstSeen[sl.WorkerID] = now
			}
			return firstSeen[sl.WorkerID]
		}
	}
	r := s.Ring(testRing)
	got, wake := decideHandOns(t0, r, seenAt(t0))
	if len(got) != 0 || !wake.Equal(t0.Add(minimal.DefaultReturnDelay)) {
		t.Fatalf("at once: %+v, wake %v; want nothing until %v", got, wake, t0.Add(minimal.DefaultReturnDelay))
	}
	at := t0.Add(minimal.DefaultReturnDelay)
	got, wake = decideHandOns(at, r, seenAt(at))
	if len(got) != 1 || got[0] != (fsm.HandOn{Ring: testRing, WorkerID: "b", Generation: r.Generation}) || !wake.IsZero() {
		t.Fatalf("after the delay: %+v, wake %v", got, wake)
	}

	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "a", Incarnation: "a-1"})
	r = s.Ring(testRing)
	delete(firstSeen, "a")
	got, wake = decideHandOns(at, r, seenAt(at))
	if len(got) != 0 || !wake.IsZero() {
		t.Fatalf("with nobody to take it: %+v, wake %v", got, wake)
	}
	if _, ok := firstSeen["a"]; !ok {
		t.Fatalf("a's delay does not run while nobody could take its slot")
	}
	if got, _ := decideHandOns(at, twoMembers(t).Ring(testRing), seenAt(at)); len(got) != 0 {
		t.Fatalf("a contiguous ring: %+v", got)
	}
}
