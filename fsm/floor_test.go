package fsm_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// The floor lifts the epochs of every ring, existing or created later: the next assignment of
// any ring is above it, whatever the ring's counter was.
func TestEpochFloorLiftsEveryRing(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: "A", Incarnation: "a1"})
	planAndAssign(t, s, ringA)
	const floor = 1_796_000_000_000_000
	mustApply(t, s, &fsm.EpochFloor{Floor: floor, Reason: "upgrade"})
	if m := mustMember(t, s, ringA, "A", "a1"); m.Epoch != 1 || m.Ranges.Empty() {
		t.Fatalf("a floor without settling changed A's assignment: %+v", m)
	}
	mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: "B", Incarnation: "b1"})
	mustApply(t, s, &fsm.Join{Ring: ringB, WorkerID: "C", Incarnation: "c1"})
	for _, ring := range []lease.RingKey{ringA, ringB} {
		for _, a := range planAndAssign(t, s, ring).Assignments {
			if a.Epoch <= floor {
				t.Fatalf("ring %s: %s got epoch %d, not above the floor %d", ring, a.WorkerID, a.Epoch, floor)
			}
		}
	}
	// A lower floor later changes nothing.
	before := stateJSON(t, s)
	mustApply(t, s, &fsm.EpochFloor{Floor: 5})
	if stateJSON(t, s) != before {
		t.Fatalf("a lower floor changed the state")
	}
}

// Settling turns every current assignment into a hold of its epoch: nothing of the recovered
// state is renewed, and the tokens stay blocked until the leader expires the holds.
func TestSettleTurnsAssignmentsIntoHolds(t *testing.T) {
	s := fsm.NewState()
	for _, w := range []string{"A", "B"} {
		mustApply(t, s, &fsm.Join{Ring: ringA, WorkerID: w, Incarnation: w + "1"})
	}
	planAndAssign(t, s, ringA)
	floor := fsm.FloorAt(time.Now(), s)
	mustApply(t, s, &fsm.EpochFloor{Floor: floor, Settle: true, Reason: "recover"})
	if !s.Settling {
		t.Fatalf("not settling")
	}
	for _, w := range []string{"A", "B"} {
		m := mustMember(t, s, ringA, w, w+"1")
		if m.Assigned() || len(m.Holds) != 1 || m.Holds[0].Ranges.Empty() {
			t.Fatalf("%s after settle: %+v, want no assignment and one hold", w, m)
		}
	}
	if err := checkStateSafety(s); err != nil {
		t.Fatal(err)
	}
	// Once the holds expired the plan gives everything again, above the floor.
	for _, ref := range fsm.PendingHolds(s.Ring(ringA)) {
		mustApply(t, s, &fsm.Expire{Ring: ringA, WorkerID: ref.WorkerID, Incarnation: ref.Incarnation, UpTo: ref.Epoch, Generation: s.Ring(ringA).Generation})
	}
	mustApply(t, s, &fsm.EpochFloor{Floor: floor, Settled: true})
	if s.Settling {
		t.Fatalf("still settling after Settled")
	}
	for _, a := range planAndAssign(t, s, ringA).Assignments {
		if a.Epoch <= floor {
			t.Fatalf("epoch %d after recovery, not above the floor %d", a.Epoch, floor)
		}
	}
	if err := checkSettledCoverage(s.Ring(ringA)); err != nil {
		t.Fatal(err)
	}
}

// FloorAt is above every epoch the state knows and above the earlier floor, even with a clock
// that reads earlier than the one that took that floor.
func TestFloorAtIsAboveEverythingKnown(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA, ringB)
		for range rapid.IntRange(0, 60).Draw(t, "steps") {
			w.step(t)
		}
		if rapid.Bool().Draw(t, "earlier floor") {
			mustApply(t, w.st, &fsm.EpochFloor{Floor: rapid.Uint64Range(1, 1<<60).Draw(t, "floor")})
		}
		now := time.UnixMicro(rapid.Int64Range(0, 1<<55).Draw(t, "now_us"))
		f := fsm.FloorAt(now, w.st)
		if f <= w.st.EpochFloor || f < uint64(max(now.UnixMicro(), 1)) {
			t.Fatalf("floor %d at %d µs, state floor %d", f, now.UnixMicro(), w.st.EpochFloor)
		}
		for _, r := range w.st.Rings {
			if f <= r.LastEpoch {
				t.Fatalf("floor %d not above ring %s's last epoch %d", f, r.Key, r.LastEpoch)
			}
		}
	})
}

// A state with a floor is written as snapshot format 4, which a node of FSM version 3 refuses
// rather than restoring a state whose epochs it would hand out again.
func TestSnapshotWithAFloorNeedsVersion4(t *testing.T) {
	s := fsm.NewState()
	mustApply(t, s, &fsm.EpochFloor{Floor: 1 << 40})
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, s); err != nil {
		t.Fatal(err)
	}
	if err := fsm.NewAt(zerolog.Nop(), 3).Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err == nil {
		t.Fatalf("a version 3 node restored a snapshot with an epoch floor")
	}
	f := fsm.New(zerolog.Nop())
	if err := f.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	f.View(func(st *fsm.State, _ uint64) {
		if st.EpochFloor != 1<<40 {
			t.Fatalf("restored floor %d", st.EpochFloor)
		}
	})
}
