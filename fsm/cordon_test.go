package fsm_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// A cordoned Node-0 keeps what it holds until it releases: the plan first gives the other member
// node index 1 and only the tokens nobody holds, then, after the release, the whole ring and
// Node-0. The cordoned member stays active with no range and a node index after the others.
func TestCordonMovesRangesOnlyAfterRelease(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "A"})
	plan := planAndAssign(t, s, ringA)
	if plan == nil {
		t.Fatalf("cordoning A planned nothing")
	}
	a, b := mustMember(t, s, ringA, "A", "a1"), mustMember(t, s, ringA, "B", "b1")
	if !a.Ranges.Empty() || a.NodeIndex == 0 || !a.Active {
		t.Fatalf("cordoned A: active %v, node %d, ranges %v; want active, not Node-0, no range", a.Active, a.NodeIndex, a.Ranges)
	}
	if !a.Held().Equal(half(0)) || !a.HoldsNode0() {
		t.Fatalf("A must keep holding its half and Node-0 until it releases: holds %v node0 %v", a.Held(), a.HoldsNode0())
	}
	if b.NodeIndex == 0 || !b.Ranges.Equal(half(1)) {
		t.Fatalf("B before A's release: node %d ranges %v, want node 1 and its own half", b.NodeIndex, b.Ranges)
	}
	mustApply(t, s, &fsm.Release{Ring: ringA, WorkerID: "A", Incarnation: "a1", Epoch: a.Epoch})
	planAndAssign(t, s, ringA)
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatal(err)
	}
	b = mustMember(t, s, ringA, "B", "b1")
	if b.NodeIndex != 0 || !b.Ranges.Equal(lease.Ranges{lease.Split(1)[0]}) {
		t.Fatalf("B after A's release: node %d ranges %v, want Node-0 and the whole ring", b.NodeIndex, b.Ranges)
	}

	// Uncordon: A gets its share back, as a joining member would (after B releases).
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "A", Clear: true})
	for range 3 {
		planAndAssign(t, s, ringA)
		for _, m := range s.Ring(ringA).ActiveMembers() {
			mustApply(t, s, &fsm.Release{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
		}
	}
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatal(err)
	}
	if a := mustMember(t, s, ringA, "A", "a1"); a.Ranges.Empty() {
		t.Fatalf("uncordoned A has no range: %s", describeRing(s.Ring(ringA)))
	}
}

// Every member cordoned: nobody gets a range, nobody is Node-0.
func TestCordonOfEveryMember(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "A"})
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "B"})
	for range 3 {
		planAndAssign(t, s, ringA)
		for _, m := range s.Ring(ringA).ActiveMembers() {
			mustApply(t, s, &fsm.Release{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
		}
	}
	r := s.Ring(ringA)
	if !r.Settled() {
		t.Fatalf("not settled: %s", describeRing(r))
	}
	for _, m := range r.ActiveMembers() {
		if m.Holding() || m.NodeIndex == 0 {
			t.Fatalf("cordoned %s holds %v, node %d", m.WorkerID, m.Held(), m.NodeIndex)
		}
	}
}

// The cordon is kept by worker id: a restart (a new incarnation) stays cordoned; it goes when the
// last member of the worker id leaves, so the state keeps no names of workers that are gone.
func TestCordonFollowsTheWorkerID(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "B"})
	join(t, s, "B", "b2")
	if !s.Ring(ringA).IsCordoned("B") {
		t.Fatalf("a new incarnation of B lost the cordon")
	}
	mustApply(t, s, &fsm.Leave{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	if !s.Ring(ringA).IsCordoned("B") {
		t.Fatalf("B's cordon went with its old incarnation while b2 is a member")
	}
	mustApply(t, s, &fsm.Leave{Ring: ringA, WorkerID: "B", Incarnation: "b2"})
	if r := s.Ring(ringA); r.IsCordoned("B") || r.Cordoned != nil {
		t.Fatalf("cordons left after B left: %v", r.Cordoned)
	}
}

// A cordon naming no member is refused (the state must not keep arbitrary names); so is a
// malformed one. Uncordoning a member that is not cordoned changes nothing.
func TestCordonRefusals(t *testing.T) {
	s := settledPair(t)
	for name, c := range map[string]*fsm.Cordon{
		"unknown worker":   {Ring: ringA, WorkerID: "nobody"},
		"unknown ring":     {Ring: ringNowhere, WorkerID: "A"},
		"uncordon unknown": {Ring: ringA, WorkerID: "nobody", Clear: true},
	} {
		if err := s.Clone().Apply(c); !errors.Is(err, fsm.ErrUnknownMember) {
			t.Errorf("%s: %v, want ErrUnknownMember", name, err)
		}
	}
	for name, c := range map[string]*fsm.Cordon{
		"no worker id": {Ring: ringA},
		"no ring":      {WorkerID: "A"},
		"long id":      {Ring: ringA, WorkerID: string(bytes.Repeat([]byte("x"), 257))},
	} {
		if err := s.Clone().Apply(c); !errors.Is(err, fsm.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	before := stateJSON(t, s)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "A", Clear: true})
	if stateJSON(t, s) != before {
		t.Fatalf("uncordoning a worker that is not cordoned changed the state")
	}
}

// A snapshot with a cordon is of format 4: a version 3 node refuses it rather than dropping the
// cordon (and giving the worker ranges again); a version 4 node restores it whole.
func TestSnapshotWithCordonNeedsVersion4(t *testing.T) {
	s := settledPair(t)
	mustApply(t, s, &fsm.Cordon{Ring: ringA, WorkerID: "B"})
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, s); err != nil {
		t.Fatal(err)
	}
	if err := fsm.NewAt(zerolog.Nop(), 3).Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err == nil {
		t.Fatalf("a version 3 node restored a snapshot with a cordon")
	}
	got, err := fsm.ReadSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Ring(ringA).IsCordoned("B") {
		t.Fatalf("the cordon did not survive the snapshot")
	}
}

// A version 3 node halts at a Cordon entry rather than skipping it.
func TestVersion3NodeHaltsAtCordon(t *testing.T) {
	f := fsm.NewAt(zerolog.Nop(), 3)
	f.Apply(commandLog(t, 1, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"}))
	if resp := f.Apply(commandLog(t, 2, &fsm.Cordon{Ring: ringA, WorkerID: "A"})); !errors.Is(resp.(error), fsm.ErrUnknownCommand) {
		t.Fatalf("version 3 node applying a Cordon: %v, want ErrUnknownCommand", resp)
	}
	if f.Halted() == nil {
		t.Fatalf("version 3 node did not halt at a Cordon")
	}
}
