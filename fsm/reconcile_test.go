package fsm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// withPlan fills the entry's assignments as the leader does: the plan of the ring as the entry's
// changes leave it.
func withPlan(s *fsm.State, c *fsm.Reconcile) *fsm.Reconcile {
	work := s.Clone()
	for _, cmd := range c.Commands() {
		_ = work.Apply(cmd) // a refused change is left out of the preview, as the FSM would refuse the entry
	}
	out := *c
	out.Assignments = nil
	if plan := fsm.Plan(work.Ring(c.Ring)); plan != nil {
		out.Assignments = plan.Assignments
	}
	return &out
}

// drawPass draws what one pass of the leader could decide for ring k of s, with its plan made on
// the state the changes produce. newIncarnation names a process that never joined. With sloppy,
// the parts may also be what no leader decides (releases of epochs not assigned yet, expiries of
// any epoch and generation, a plan made on the state before the changes, or none).
func drawPass(t *rapid.T, s *fsm.State, k lease.RingKey, newIncarnation func() string, sloppy bool) *fsm.Reconcile {
	r := s.Ring(k)
	c := &fsm.Reconcile{Ring: k}
	named := map[string]bool{}
	joined := map[string]bool{}
	join := func(workerID, incarnation string) {
		key := fsm.MemberKey(workerID, incarnation)
		if named[key] || joined[workerID] {
			return
		}
		named[key], joined[workerID] = true, true
		c.Joins = append(c.Joins, fsm.MemberRef{WorkerID: workerID, Incarnation: incarnation})
	}
	if r != nil {
		for _, m := range r.SortedMembers() {
			switch rapid.IntRange(0, 4).Draw(t, "part") {
			case 0:
				epoch := m.Epoch
				if sloppy {
					epoch = drawEpoch(t, r, m)
				}
				if epoch > 0 {
					c.Releases = append(c.Releases, fsm.ReleaseRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: epoch})
				}
			case 1:
				if !m.Active {
					join(m.WorkerID, m.Incarnation)
				}
			case 2:
				if m.Active && !named[m.Key()] {
					named[m.Key()] = true
					c.Downs = append(c.Downs, fsm.MemberRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation})
				}
			}
		}
		for _, h := range fsm.PendingHolds(r) {
			if rapid.Bool().Draw(t, "expire") {
				c.Expires = append(c.Expires, fsm.ExpireRef{WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: r.Generation})
			}
		}
		if sloppy && rapid.Bool().Draw(t, "sloppy_expire") {
			w, inc, m := drawMemberRef(t, r)
			if w != "" && inc != "" {
				c.Expires = append(c.Expires, fsm.ExpireRef{WorkerID: w, Incarnation: inc, UpTo: drawEpoch(t, r, m), Generation: drawGeneration(t, r)})
			}
		}
	}
	for range rapid.IntRange(0, 3).Draw(t, "new_joins") {
		join(fmt.Sprintf("w%d", rapid.IntRange(0, workerPool-1).Draw(t, "worker")), newIncarnation())
	}
	if c.Empty() {
		join(fmt.Sprintf("w%d", rapid.IntRange(0, workerPool-1).Draw(t, "worker")), newIncarnation())
	}
	if !sloppy {
		return withPlan(s, c)
	}
	switch rapid.IntRange(0, 2).Draw(t, "plan") {
	case 0:
		return withPlan(s, c)
	case 1:
		if plan := fsm.Plan(r); plan != nil {
			c.Assignments = plan.Assignments // made on the state before the changes: maybe stale
		}
	}
	return c
}

// TestReconcileIsItsCommandsInOrder: on states reached by generated histories, a Reconcile does
// what its parts do when applied one by one (a release of a member no longer there left out), or
// is refused with the first refusal among them and changes nothing; and applying it again
// changes nothing more.
func TestReconcileIsItsCommandsInOrder(t *testing.T) {
	refused, accepted := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA, ringB)
		for range rapid.IntRange(0, 120).Draw(t, "steps") {
			w.step(t)
		}
		n := 0
		c := drawPass(t, w.st, rapid.SampledFrom(w.rings).Draw(t, "ring"), func() string { n++; return fmt.Sprintf("new%d", n) }, true)

		one := w.st.Clone()
		var firstErr error
		for _, cmd := range c.Commands() {
			err := one.Apply(cmd)
			if _, ok := cmd.(*fsm.Release); ok && errors.Is(err, fsm.ErrUnknownMember) {
				continue
			}
			if err != nil {
				firstErr = err
				break
			}
		}

		whole := w.st.Clone()
		before := stateJSON(t, whole)
		err := whole.Apply(c)
		switch {
		case firstErr != nil:
			refused++
			if err == nil || !strings.Contains(err.Error(), firstErr.Error()) {
				t.Fatalf("parts one by one refused with %v, the entry: %v\n%+v", firstErr, err, c)
			}
			if stateJSON(t, whole) != before {
				t.Fatalf("a refused entry (%v) changed the state", err)
			}
		case err != nil:
			t.Fatalf("parts one by one accepted, the entry refused: %v\n%+v", err, c)
		default:
			accepted++
			if got, want := stateJSON(t, whole), stateJSON(t, one); got != want {
				t.Fatalf("entry and parts differ:\nentry: %s\nparts: %s\n%+v", got, want, c)
			}
		}
		once := stateJSON(t, whole)
		if err2 := whole.Apply(c); (err2 == nil) != (err == nil) || stateJSON(t, whole) != once {
			t.Fatalf("applied again: %v (first %v); changed: %v", err2, err, stateJSON(t, whole) != once)
		}
		if err := checkStateSafety(whole); err != nil {
			t.Fatalf("after %+v: %v", c, err)
		}
	})
	t.Logf("%d entries accepted, %d refused", accepted, refused)
	if accepted == 0 || refused == 0 {
		t.Fatalf("the generator covers only one outcome: %d accepted, %d refused", accepted, refused)
	}
}

// A plan made before a member left is refused with ErrUnsafeAssignment, and the joins that came
// with it are refused with it: nothing of the entry is applied, and the next pass decides the
// joins again on the state as it is.
func TestReconcileWithAStalePlanIsRefusedWhole(t *testing.T) {
	s := settledPair(t)
	c := withPlan(s, &fsm.Reconcile{Ring: ringA, Joins: []fsm.MemberRef{{WorkerID: "C", Incarnation: "c1"}}})
	if len(c.Assignments) != 3 {
		t.Fatalf("plan of the pass: %+v, want one assignment for each of A, B, C", c.Assignments)
	}
	mustApply(t, s, &fsm.Leave{Ring: ringA, WorkerID: "B", Incarnation: "b1"}) // committed in between
	before := stateJSON(t, s)
	if err := s.Apply(c); !errors.Is(err, fsm.ErrUnsafeAssignment) {
		t.Fatalf("stale pass: %v, want ErrUnsafeAssignment", err)
	}
	if stateJSON(t, s) != before {
		t.Fatalf("a refused pass changed the state")
	}
	next := withPlan(s, &fsm.Reconcile{Ring: ringA, Joins: []fsm.MemberRef{{WorkerID: "C", Incarnation: "c1"}}})
	mustApply(t, s, next)
	if m := mustMember(t, s, ringA, "C", "c1"); !m.Active || !m.Assigned() {
		t.Fatalf("the pass decided again did not join and assign C: %+v", m)
	}
}

// A join storm on an empty ring is one entry that settles the ring: every member gets its equal
// share at once, nobody held anything before.
func TestReconcileOfAJoinStormSettlesInOneEntry(t *testing.T) {
	s := fsm.NewState()
	c := &fsm.Reconcile{Ring: ringA}
	for i := range 10 {
		c.Joins = append(c.Joins, fsm.MemberRef{WorkerID: fmt.Sprintf("w%d", i), Incarnation: "i"})
	}
	mustApply(t, s, withPlan(s, c))
	if r := s.Ring(ringA); !r.Settled() || len(r.ActiveMembers()) != 10 {
		t.Fatalf("after one entry: %s", describeRing(r))
	}
}

func TestReconcileMalformed(t *testing.T) {
	w := fsm.MemberRef{WorkerID: "w", Incarnation: "i"}
	cases := map[string]*fsm.Reconcile{
		"nothing":             {Ring: ringA},
		"bad ring":            {Ring: lease.RingKey{Region: "eu"}, Joins: []fsm.MemberRef{w}},
		"join without id":     {Ring: ringA, Joins: []fsm.MemberRef{{Incarnation: "i"}}},
		"release without inc": {Ring: ringA, Releases: []fsm.ReleaseRef{{WorkerID: "w", Epoch: 1}}},
		"expire without id":   {Ring: ringA, Expires: []fsm.ExpireRef{{Incarnation: "i", UpTo: 1}}},
		"joined and downed":   {Ring: ringA, Joins: []fsm.MemberRef{w}, Downs: []fsm.MemberRef{w}},
		"downed twice":        {Ring: ringA, Downs: []fsm.MemberRef{w, w}},
		"two incarnations":    {Ring: ringA, Joins: []fsm.MemberRef{w, {WorkerID: "w", Incarnation: "j"}}},
		"assignment epoch 0":  {Ring: ringA, Joins: []fsm.MemberRef{w}, Assignments: []fsm.Assignment{{WorkerID: "w", Incarnation: "i", NodeCount: 1}}},
	}
	for name, c := range cases {
		s := settledPair(t)
		before := stateJSON(t, s)
		if err := s.Apply(c); !errors.Is(err, fsm.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
		if stateJSON(t, s) != before {
			t.Errorf("%s: a malformed entry changed the state", name)
		}
	}
}

// fuzzPasses are Reconcile seeds for the fuzz test: a pass of each kind on the fuzz base.
func fuzzPasses(tb failer, base *fsm.State) []fsm.Command {
	tb.Helper()
	r := base.Ring(ringA)
	var out []fsm.Command
	var expires []fsm.ExpireRef
	for _, h := range fsm.PendingHolds(r) {
		expires = append(expires, fsm.ExpireRef{WorkerID: h.WorkerID, Incarnation: h.Incarnation, UpTo: h.Epoch, Generation: r.Generation})
	}
	var releases []fsm.ReleaseRef
	var downs []fsm.MemberRef
	for _, m := range r.ActiveMembers() {
		if m.Assigned() {
			releases = append(releases, fsm.ReleaseRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
		}
		downs = append(downs, fsm.MemberRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation})
	}
	joins := []fsm.MemberRef{{WorkerID: "F", Incarnation: "F1"}, {WorkerID: "A", Incarnation: "A1"}}
	for _, c := range []*fsm.Reconcile{
		{Ring: ringA, Joins: joins},
		{Ring: ringA, Releases: releases},
		{Ring: ringA, Expires: expires},
		{Ring: ringA, Downs: downs[:1], Releases: releases},
		{Ring: ringA, Joins: joins, Releases: releases, Expires: expires},
		{Ring: ringB, Joins: joins},
	} {
		out = append(out, withPlan(base, c))
	}
	// A plan of the state before the changes: maybe refused.
	if plan := fsm.Plan(r); plan != nil {
		out = append(out, &fsm.Reconcile{Ring: ringA, Joins: joins, Assignments: plan.Assignments})
	}
	return out
}
