package fsm_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

func join(t *testing.T, s *fsm.State, workerID, incarnation string) {
	t.Helper()
	mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: workerID, Incarnation: incarnation})
}

// settledPair returns a ring where A (Node-0, first half) and B (second half) are settled.
func settledPair(t *testing.T) *fsm.State {
	t.Helper()
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "B", "b1")
	planAndAssign(t, s, ringA)
	a := mustMember(t, s, ringA, "A", "a1")
	mustApply(t, s, &fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "a1", Epoch: a.Epoch})
	planAndAssign(t, s, ringA)
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

// The first worker keeps its first half at once; the second gets the second half only after the
// first released the epoch that took it away.
func TestJoinOfSecondWorker(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	a := mustMember(t, s, ringA, "A", "a1")
	if !a.Ranges.Equal(lease.Ranges{lease.FullRing}) || !a.IsNode0() || a.NodeCount != 1 {
		t.Fatalf("a lone worker should own the ring as Node-0: %+v", a)
	}
	first := a.Epoch

	join(t, s, "B", "b1")
	plan := planAndAssign(t, s, ringA)
	if plan == nil || len(plan.Assignments) != 2 {
		t.Fatalf("plan after join: %+v", plan)
	}
	a = mustMember(t, s, ringA, "A", "a1")
	b := mustMember(t, s, ringA, "B", "b1")
	if !a.Ranges.Equal(half(0)) || !a.IsNode0() || a.Epoch <= first {
		t.Fatalf("A should keep the first half as Node-0 under a new epoch at once: %+v", a)
	}
	if !a.Held().Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("A's old epoch should still hold the second half: held %v", a.Held())
	}
	if !b.Ranges.Empty() || b.NodeIndex != 1 || !b.Assigned() {
		t.Fatalf("B should get an assignment without ranges while A may use them: %+v", b)
	}
	if fsm.Plan(s.Ring(ringA)) != nil {
		t.Fatalf("nothing may move before A releases")
	}

	mustApply(t, s, &fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "a1", Epoch: a.Epoch})
	planAndAssign(t, s, ringA)
	b = mustMember(t, s, ringA, "B", "b1")
	if !b.Ranges.Equal(half(1)) || b.NodeIndex != 1 || b.NodeCount != 2 {
		t.Fatalf("B should get the second half after the release: %+v", b)
	}
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatalf("%v", err)
	}
}

// When Node-0 dies, the survivor keeps its range but becomes index 0 (and gets the dead one's
// range) only after the dead one's epoch expired.
func TestNode0Death(t *testing.T) {
	s := settledPair(t)
	a := mustMember(t, s, ringA, "A", "a1")
	mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	if plan := fsm.Plan(s.Ring(ringA)); plan != nil {
		t.Fatalf("nothing may move while the dead Node-0's lease may be in use: %+v", plan.Assignments)
	}
	holds := fsm.PendingHolds(s.Ring(ringA))
	if len(holds) != 1 || holds[0] != (fsm.HoldRef{WorkerID: "A", Incarnation: "a1", Epoch: a.Epoch}) {
		t.Fatalf("pending holds: %+v", holds)
	}
	// An Assign that makes B Node-0 now is refused, whoever proposes it.
	b := mustMember(t, s, ringA, "B", "b1")
	early := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b1", Epoch: s.Ring(ringA).LastEpoch + 1, NodeIndex: 0, NodeCount: 1, Ranges: b.Ranges}}}
	if err := s.Apply(early); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("B made Node-0 while A may be: %v", err)
	}

	mustApply(t, s, &fsm.Expire{Ring: ringA, WorkerID: "A", Incarnation: "a1", UpTo: a.Epoch, Generation: s.Ring(ringA).Generation})
	if member(s, ringA, "A", "a1") != nil {
		t.Fatalf("an expired departed member should be forgotten")
	}
	planAndAssign(t, s, ringA)
	b = mustMember(t, s, ringA, "B", "b1")
	if !b.IsNode0() || b.NodeCount != 1 || !b.Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("the survivor should be Node-0 with the whole ring: %+v", b)
	}
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatalf("%v", err)
	}
}

// A restarted worker (new incarnation) gets nothing while its old incarnation holds something,
// not even tokens that nobody holds.
func TestNewIncarnationWaitsForTheOld(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	join(t, s, "B", "b1")
	planAndAssign(t, s, ringA) // A: first half, Node-0; B: second half
	join(t, s, "B", "b2")      // B restarts; b1 may still be running
	if m := mustMember(t, s, ringA, "B", "b1"); m.Active || !m.Ranges.Equal(half(1)) {
		t.Fatalf("the old incarnation should be departed and keep its range: %+v", m)
	}
	planAndAssign(t, s, ringA)
	b2 := mustMember(t, s, ringA, "B", "b2")
	if b2.Holding() {
		t.Fatalf("the new incarnation got something while the old one holds: %+v", b2)
	}

	// A leaves: the first half is free, yet b2 must still get nothing while b1 holds.
	mustApply(t, s, &fsm.Leave{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	planAndAssign(t, s, ringA)
	b2 = mustMember(t, s, ringA, "B", "b2")
	if b2.Holding() {
		t.Fatalf("the new incarnation got %v (Node-0 %v) while the old one holds the second half", b2.Ranges, b2.HoldsNode0())
	}
	// Nor may an Assign written by hand give it anything.
	free := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b2", Epoch: s.Ring(ringA).LastEpoch + 1, NodeIndex: 1, NodeCount: 2, Ranges: half(0)}}}
	if err := s.Apply(free); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("a range given to b2 while b1 holds: %v", err)
	}

	b1 := mustMember(t, s, ringA, "B", "b1")
	mustApply(t, s, &fsm.Expire{Ring: ringA, WorkerID: "B", Incarnation: "b1", UpTo: b1.Epoch, Generation: s.Ring(ringA).Generation})
	planAndAssign(t, s, ringA)
	b2 = mustMember(t, s, ringA, "B", "b2")
	if !b2.Ranges.Equal(lease.Ranges{lease.FullRing}) || !b2.IsNode0() {
		t.Fatalf("the new incarnation should own the ring once the old one expired: %+v", b2)
	}
}

// A restart before any assignment leaves an old incarnation that holds nothing: it must not stay
// behind, since no Expire would ever name it and the ring could never settle. (Failed before the
// fix in applyJoin.)
func TestRestartBeforeAssignmentForgetsTheIdleIncarnation(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	join(t, s, "A", "a2")
	if member(s, ringA, "A", "a1") != nil {
		t.Fatalf("the idle old incarnation was kept")
	}
	planAndAssign(t, s, ringA)
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatalf("%v", err)
	}
}

// A superseded process that reconnects with its old incarnation supersedes the newer one in turn:
// one worker id never has two active members. (Failed before the fix in applyJoin.)
func TestReconnectOfSupersededIncarnation(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "A", "a2")
	join(t, s, "A", "a1")
	a1 := mustMember(t, s, ringA, "A", "a1")
	if !a1.Active || !a1.IsNode0() {
		t.Fatalf("the reconnected incarnation should be active and keep its lease: %+v", a1)
	}
	if m := member(s, ringA, "A", "a2"); m != nil && m.Active {
		t.Fatalf("two active incarnations of A")
	}
	if err := checkStateSafety(s); err != nil {
		t.Fatalf("%v", err)
	}
	if plan := fsm.Plan(s.Ring(ringA)); plan != nil {
		t.Fatalf("the reconnected member's lease should simply continue: %+v", plan.Assignments)
	}
}

func TestReleaseOfFutureEpoch(t *testing.T) {
	s := settledPair(t)
	a := mustMember(t, s, ringA, "A", "a1")
	before := stateJSON(t, s)
	err := s.Apply(&fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "a1", Epoch: a.Epoch + 1})
	if !errors.Is(err, fsm.ErrBadEpoch) {
		t.Fatalf("release of a future epoch: %v", err)
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused release changed the state")
	}
	if err := s.Apply(&fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "nope", Epoch: 1}); !errors.Is(err, fsm.ErrUnknownMember) {
		t.Fatalf("release of an unknown member: %v", err)
	}
}

// An Assign planned before a member departed is refused once it has: leases of a departed member are
// not renewed, so it must not get a new assignment. An Assign naming someone who never joined, or
// a ring that does not exist, is refused too.
func TestAssignNamingDepartedMemberRefused(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "B", "b1")
	plan := fsm.Plan(s.Ring(ringA))
	mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	before := stateJSON(t, s)
	if err := s.Apply(plan); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("assign naming a departed member: %v", err)
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused assign changed the state")
	}

	unknown := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "C", Incarnation: "c1", Epoch: 99, NodeIndex: 1, NodeCount: 2}}}
	if err := s.Apply(unknown); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("assign naming an unknown member: %v", err)
	}
	noRing := &fsm.Assign{Ring: ringB, Assignments: []fsm.Assignment{{WorkerID: "A", Incarnation: "a1", Epoch: 99}}}
	if err := s.Apply(noRing); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("assign to a ring that does not exist: %v", err)
	}
}

// An Assign planned on an older state (a second plan of the same epochs, or a plan that reuses
// an epoch) is refused or changes nothing; a token held by another member is never given.
func TestStaleAndOverlappingAssignRefused(t *testing.T) {
	s := settledPair(t)
	r := s.Ring(ringA)
	next := r.LastEpoch + 1
	b := mustMember(t, s, ringA, "B", "b1")
	grab := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b1", Epoch: next, NodeIndex: 1, NodeCount: 2, Ranges: lease.Ranges{lease.FullRing}}}}
	if err := s.Apply(grab); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("B given A's half: %v", err)
	}
	before := stateJSON(t, s)
	same := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b1", Epoch: b.Epoch, NodeIndex: b.NodeIndex, NodeCount: b.NodeCount, Ranges: b.Ranges}}}
	if err := s.Apply(same); err != nil {
		t.Fatalf("an assignment already installed, exactly, should be a no-op: %v", err)
	}
	other := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b1", Epoch: b.Epoch, NodeIndex: 1, NodeCount: 2, Ranges: lease.Ranges{lease.FullRing}}}}
	if err := s.Apply(other); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("an installed epoch with other content must not be reported as applied: %v", err)
	}
	older := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "B", Incarnation: "b1", Epoch: b.Epoch - 1, NodeIndex: 1, NodeCount: 2}}}
	if err := s.Apply(older); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("an overtaken epoch must not be reported as applied: %v", err)
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused or repeated assign changed the state")
	}
	// A's first assignment was epoch 1; a new epoch that is not above the ring's last is stale.
	join(t, s, "C", "c1")
	stale := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "C", Incarnation: "c1", Epoch: 1, NodeIndex: 2, NodeCount: 3}}}
	if err := s.Apply(stale); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("an assign reusing an old epoch: %v", err)
	}
}

// A Leave frees everything at once, Node-0 included.
func TestLeaveFreesEverythingAtOnce(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Leave{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	if len(fsm.PendingHolds(s.Ring(ringA))) != 0 {
		t.Fatalf("a leave left holds behind")
	}
	planAndAssign(t, s, ringA)
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatalf("%v", err)
	}
	if fsm.Plan(s.Ring(ringA)) != nil {
		t.Fatalf("settled after one plan")
	}
}

// A reconnect with the same incarnation continues the member's lease: no new assignment.
func TestReconnectContinuesLease(t *testing.T) {
	s := settledPair(t)
	before := mustMember(t, s, ringA, "B", "b1").Epoch
	gen := s.Ring(ringA).Generation
	mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	join(t, s, "B", "b1")
	if s.Ring(ringA).Generation <= gen {
		t.Fatalf("membership changed twice but the generation did not grow")
	}
	if fsm.Plan(s.Ring(ringA)) != nil {
		t.Fatalf("a reconnect should need no new assignment")
	}
	if b := mustMember(t, s, ringA, "B", "b1"); b.Epoch != before || !b.Active {
		t.Fatalf("the reconnected member's lease changed: %+v", b)
	}
}

// Assignments with a range whose start is past its end are malformed: Ranges.Intersect does not see
// them, so they would slip through the exclusivity check. (Failed before the check in applyAssign.)
func TestAssignWithInvertedRangeRefused(t *testing.T) {
	s := settledPair(t)
	join(t, s, "C", "c1")
	inverted := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{{WorkerID: "C", Incarnation: "c1", Epoch: s.Ring(ringA).LastEpoch + 1, NodeIndex: 2, NodeCount: 3, Ranges: lease.Ranges{{Start: 10, End: -10}}}}}
	before := stateJSON(t, s)
	if err := s.Apply(inverted); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("an inverted range was accepted: %s", describeRing(s.Ring(ringA)))
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused assign changed the state")
	}
}

func TestRingIDsDoNotCollide(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	mustApply(t, s, &fsm.Join{Ring: ringB, WorkerID: "A", Incarnation: "a1"})
	planAndAssign(t, s, ringA)
	if len(s.Rings) != 2 || s.Ring(ringB).LastEpoch != 0 {
		t.Fatalf("rings are not independent")
	}
	if err := s.Apply(&fsm.Join{Ring: lease.RingKey{Region: "eu"}, WorkerID: "A", Incarnation: "a1"}); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("join of an incomplete ring key: %v", err)
	}
	if err := s.Apply(&fsm.Join{Ring: ringA, WorkerID: "", Incarnation: "a1"}); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("join without worker id: %v", err)
	}
	if err := s.Apply(nil); !errors.Is(err, fsm.ErrMalformed) {
		t.Fatalf("nil command: %v", err)
	}
	// Command values (not pointers) are accepted too.
	if err := s.Apply(fsm.Down{Ring: ringA, WorkerID: "A", Incarnation: "a1"}); err != nil {
		t.Fatalf("value command: %v", err)
	}
	if m := mustMember(t, s, ringA, "A", "a1"); m.Active {
		t.Fatalf("a Down given by value was not applied")
	}
}

// State.Ring returns nil for a ring nobody joined; planning it must not panic the leader. (Plan and
// PendingHolds dereferenced the nil ring before the fix.)
func TestPlanOfMissingRing(t *testing.T) {
	s := fsm.NewState()
	if fsm.Plan(s.Ring(ringA)) != nil || fsm.PendingHolds(s.Ring(ringA)) != nil {
		t.Fatalf("a missing ring has nothing to plan")
	}
}

// An Expire is decided on the applied state but lands later; if the member came back in between
// (and was renewed), the Expire must not free what the renewal handed out again. Two sequences, in
// raft log order, each starting with B departed and holding its current epoch:
//   - reconnect, (B renewed), down again, Expire decided before the reconnect: B's current epoch
//     must survive;
//   - reconnect, (B renewed), B shrinks (its renewed epoch becomes a hold), Expire: the hold must
//     survive.
//
// (Both failed before Expire named the generation it was decided on.)
func TestExpireDecidedBeforeReconnect(t *testing.T) {
	for _, shrink := range []bool{false, true} {
		s := settledPair(t)
		mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
		b := mustMember(t, s, ringA, "B", "b1")
		renewed := b.Ranges
		// The leader's timer for B's epoch ran out: it decides on the state as it is now.
		expire := &fsm.Expire{Ring: ringA, WorkerID: "B", Incarnation: "b1", UpTo: b.Epoch, Generation: s.Ring(ringA).Generation}
		// Entries proposed before that decision are applied first.
		join(t, s, "B", "b1") // the leader renews B's epoch from here on
		if shrink {
			join(t, s, "C", "c1")
			planAndAssign(t, s, ringA) // B's renewed epoch becomes a hold
		} else {
			mustApply(t, s, &fsm.Down{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
		}
		mustApply(t, s, expire)
		b = member(s, ringA, "B", "b1")
		if b == nil || !renewed.Subtract(b.Held()).Empty() {
			t.Fatalf("shrink=%v: a stale Expire freed a lease renewed after it was decided: %s", shrink, describeRing(s.Ring(ringA)))
		}
		// Decided again on the new state, it takes effect.
		mustApply(t, s, &fsm.Expire{Ring: ringA, WorkerID: "B", Incarnation: "b1", UpTo: expire.UpTo, Generation: s.Ring(ringA).Generation})
		if b := member(s, ringA, "B", "b1"); b != nil && (!b.Active || len(b.Holds) > 0) {
			t.Fatalf("shrink=%v: a fresh Expire did not free the expired epoch: %s", shrink, describeRing(s.Ring(ringA)))
		}
	}
}

// Two plans made on states with the same last epoch (the second before the first was applied) share
// epoch numbers. Once the first is applied, the second must be refused, not reported as applied:
// a leader that sends what it proposed after a nil result would hand out tokens the state never
// gave. (Failed before: Apply skipped any assignment whose epoch the member had reached.)
func TestSecondPlanOfSameEpochsRefused(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "B", "b1")
	first := fsm.Plan(s.Ring(ringA)) // A shrinks to the first half, B gets nothing yet
	// A second plan of the same epochs, made on another state (here: as if B had left meanwhile
	// and come back, so A keeps the whole ring): the same epoch for A, other ranges.
	second := fsm.Plan(s.Ring(ringA))
	second.Assignments[0].Ranges = lease.Ranges{lease.FullRing}
	mustApply(t, s, first)
	before := stateJSON(t, s)
	if err := s.Apply(second); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("a plan whose epochs were installed with other content was reported as applied: %v", err)
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused plan changed the state")
	}
	if err := s.Apply(first); err != nil {
		t.Fatalf("the applied plan, again, should be a no-op: %v", err)
	}
}

// An Assign that names a member or an epoch twice, or epoch 0, is malformed: no plan produces it,
// and epochs must stay unique in a ring.
func TestAssignNamingTwiceRefused(t *testing.T) {
	s := settledPair(t)
	join(t, s, "C", "c1")
	next := s.Ring(ringA).LastEpoch + 1
	for name, as := range map[string][]fsm.Assignment{
		"member twice": {{WorkerID: "C", Incarnation: "c1", Epoch: next, NodeIndex: 2, NodeCount: 3}, {WorkerID: "C", Incarnation: "c1", Epoch: next + 1, NodeIndex: 2, NodeCount: 3}},
		"epoch twice":  {{WorkerID: "C", Incarnation: "c1", Epoch: next, NodeIndex: 2, NodeCount: 3}, {WorkerID: "B", Incarnation: "b1", Epoch: next, NodeIndex: 1, NodeCount: 3}},
		"epoch 0":      {{WorkerID: "C", Incarnation: "c1", Epoch: 0, NodeIndex: 2, NodeCount: 3}},
		"bad index":    {{WorkerID: "C", Incarnation: "c1", Epoch: next, NodeIndex: 3, NodeCount: 3}},
	} {
		if err := s.Apply(&fsm.Assign{Ring: ringA, Assignments: as}); !errors.Is(err, fsm.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Two assignments of one command may not give the same token away twice, even a token nobody
// held before the command.
func TestAssignGivingOneTokenTwiceRefused(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	join(t, s, "B", "b1")
	r := s.Ring(ringA)
	both := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{
		{WorkerID: "A", Incarnation: "a1", Epoch: r.LastEpoch + 1, NodeIndex: 0, NodeCount: 2, Ranges: lease.Ranges{{Start: lease.MinToken, End: 10}}},
		{WorkerID: "B", Incarnation: "b1", Epoch: r.LastEpoch + 2, NodeIndex: 1, NodeCount: 2, Ranges: lease.Ranges{{Start: 10, End: lease.MaxToken}}},
	}}
	if err := s.Apply(both); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("token 10 given to two members in one command: %v", err)
	}
	twoNode0 := &fsm.Assign{Ring: ringA, Assignments: []fsm.Assignment{
		{WorkerID: "A", Incarnation: "a1", Epoch: r.LastEpoch + 1, NodeIndex: 0, NodeCount: 2},
		{WorkerID: "B", Incarnation: "b1", Epoch: r.LastEpoch + 2, NodeIndex: 0, NodeCount: 2},
	}}
	if err := s.Apply(twoNode0); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("two Node-0 in one command: %v", err)
	}
}

// The leader renews an active member's current epoch, so an Expire naming it (a leader bug: it
// lists only older epochs of active members) frees its older holds but never its current lease.
func TestExpireKeepsActiveMembersCurrentLease(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "B", "b1")
	planAndAssign(t, s, ringA) // A shrinks: a hold of its first epoch
	a := mustMember(t, s, ringA, "A", "a1")
	mustApply(t, s, &fsm.Expire{Ring: ringA, WorkerID: "A", Incarnation: "a1", UpTo: a.Epoch, Generation: s.Ring(ringA).Generation})
	a = mustMember(t, s, ringA, "A", "a1")
	if !a.Ranges.Equal(half(0)) || !a.IsNode0() || len(a.Holds) != 0 {
		t.Fatalf("expire of an active member's current epoch: %+v", a)
	}
}

// Every command applies the same given as a value or as a pointer (Decode returns pointers; callers
// may build values).
func TestValueAndPointerCommandsApplyTheSame(t *testing.T) {
	for _, c := range oneOfEach() {
		byPtr, byVal := fuzzBase(t), fuzzBase(t)
		errPtr := byPtr.Apply(c)
		errVal := byVal.Apply(reflect.ValueOf(c).Elem().Interface().(fsm.Command))
		if (errPtr == nil) != (errVal == nil) || stateJSON(t, byPtr) != stateJSON(t, byVal) {
			t.Fatalf("%T: by pointer %v, by value %v", c, errPtr, errVal)
		}
	}
}

func TestActiveByWorker(t *testing.T) {
	s := fsm.NewState()
	join(t, s, "A", "a1")
	planAndAssign(t, s, ringA)
	join(t, s, "A", "a2")
	r := s.Ring(ringA)
	if m := r.ActiveByWorker("A"); m == nil || m.Incarnation != "a2" {
		t.Fatalf("active incarnation of A: %+v", m)
	}
	if r.ActiveByWorker("B") != nil {
		t.Fatalf("a worker that never joined has an active member")
	}
	if r.Settled() {
		t.Fatalf("a ring with a departed holder is not settled")
	}
}
