package leader

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
	got, wake := DecideHandOns(t0, r, seenAt(t0))
	if len(got) != 0 || !wake.Equal(t0.Add(minimal.DefaultReturnDelay)) {
		t.Fatalf("at once: %+v, wake %v; want nothing until %v", got, wake, t0.Add(minimal.DefaultReturnDelay))
	}
	at := t0.Add(minimal.DefaultReturnDelay)
	got, wake = DecideHandOns(at, r, seenAt(at))
	if len(got) != 1 || got[0] != (fsm.HandOn{Ring: testRing, WorkerID: "b", Generation: r.Generation}) || !wake.IsZero() {
		t.Fatalf("after the delay: %+v, wake %v", got, wake)
	}

	apply(t, s, &fsm.Down{Ring: testRing, WorkerID: "a", Incarnation: "a-1"})
	r = s.Ring(testRing)
	delete(firstSeen, "a")
	got, wake = DecideHandOns(at, r, seenAt(at))
	if len(got) != 0 || !wake.IsZero() {
		t.Fatalf("with nobody to take it: %+v, wake %v", got, wake)
	}
	if _, ok := firstSeen["a"]; !ok {
		t.Fatalf("a's delay does not run while nobody could take its slot")
	}
	if got, _ := DecideHandOns(at, twoMembers(t).Ring(testRing), seenAt(at)); len(got) != 0 {
		t.Fatalf("a contiguous ring: %+v", got)
	}

	// The delay is the setting's, when it is not the default.
	s = twoMembers(t)
	apply(t, s, &fsm.SetMovement{Ring: testRing, Mode: fsm.ModeMinimal, ReturnDelayMs: 45_000},
		&fsm.Down{Ring: testRing, WorkerID: "b", Incarnation: "b-1"})
	clear(firstSeen)
	if got, wake := DecideHandOns(t0, s.Ring(testRing), seenAt(t0)); len(got) != 0 || !wake.Equal(t0.Add(45*time.Second)) {
		t.Fatalf("a 45 s return delay: %+v, wake %v; want nothing until %v", got, wake, t0.Add(45*time.Second))
	}
	if got, _ := DecideHandOns(t0.Add(minimal.DefaultReturnDelay), s.Ring(testRing), seenAt(t0)); len(got) != 0 {
		t.Fatalf("a 45 s return delay handed on after the default's 10 s: %+v", got)
	}
}

// settleAll releases every active member's epoch, expires every pending hold and plans, until
// the plan changes nothing.
func settleAll(t *testing.T, s *fsm.State) {
	t.Helper()
	for range 10 {
		r := s.Ring(testRing)
		for _, m := range r.ActiveMembers() {
			if m.Assigned() {
				apply(t, s, &fsm.Release{Ring: testRing, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
			}
		}
		for _, h := range fsm.PendingHolds(s.Ring(testRing)) {
			apply(t, s, &fsm.Expire{Ring: testRing, WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: s.Ring(testRing).Generation})
		}
		a := fsm.Plan(s.Ring(testRing))
		if a == nil {
			return
		}
		apply(t, s, a)
	}
	t.Fatalf("the ring does not settle")
}

// TestDecideEvenOutWaitsForAnIdleRing: a settled minimal-mode ring whose shares are not even gets
// an even-out step once the leader has seen it settled for the setting's idle time (it wakes
// then; 30 s here, not the default), decided on its generation and step; a ring with a change in
// flight, or already even, gets none.
func TestDecideEvenOutWaitsForAnIdleRing(t *testing.T) {
	s := fsm.NewState()
	const evenOutIdle = 30 * time.Second
	apply(t, s, &fsm.SetMovement{Ring: testRing, Mode: fsm.ModeMinimal, IdleMs: evenOutIdle.Milliseconds()})
	for _, w := range []string{"a", "b", "c"} {
		apply(t, s, join(w))
		settleAll(t, s)
	}
	r := s.Ring(testRing)
	if !r.Settled() || r.EvenedOut() {
		t.Fatalf("setup: settled %v, even %v", r.Settled(), r.EvenedOut())
	}
	seen := func() time.Time { return t0 }
	if step, wake := DecideEvenOut(t0, r, seen); step != nil || !wake.Equal(t0.Add(evenOutIdle)) {
		t.Fatalf("at once: %+v, wake %v", step, wake)
	}
	step, wake := DecideEvenOut(t0.Add(evenOutIdle), r, seen)
	if step == nil || *step != (fsm.EvenOut{Ring: testRing, Generation: r.Generation, Step: 0}) || !wake.IsZero() {
		t.Fatalf("idle: %+v, wake %v", step, wake)
	}
	apply(t, s, step)
	if step, _ := DecideEvenOut(t0.Add(evenOutIdle), s.Ring(testRing), seen); step != nil {
		t.Fatalf("a step in flight, yet another: %+v", step)
	}
	for range 50 {
		settleAll(t, s)
		r = s.Ring(testRing)
		if r.EvenedOut() {
			break
		}
		step, _ := DecideEvenOut(t0.Add(evenOutIdle), r, seen)
		if step == nil {
			t.Fatalf("a settled ring that is not even got no step")
		}
		apply(t, s, step)
	}
	if step, wake := DecideEvenOut(t0.Add(evenOutIdle), s.Ring(testRing), seen); step != nil || !wake.IsZero() || !s.Ring(testRing).EvenedOut() {
		t.Fatalf("an even ring: %+v, wake %v", step, wake)
	}
}
