package fsm_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

var ringNowhere = lease.RingKey{Region: "ap", Cluster: "c9", Service: "none"}

// drawMemberRef names a member of the ring: an existing one (active or departed), another
// incarnation of a known worker, or a stranger.
func drawMemberRef(t *rapid.T, r *fsm.Ring) (workerID, incarnation string, m *fsm.Member) {
	var members []*fsm.Member
	if r != nil {
		members = r.SortedMembers()
	}
	switch n := rapid.IntRange(0, 9).Draw(t, "who"); {
	case n < 7 && len(members) > 0:
		m := members[rapid.IntRange(0, len(members)-1).Draw(t, "member")]
		return m.WorkerID, m.Incarnation, m
	case n < 9 && len(members) > 0:
		m := members[rapid.IntRange(0, len(members)-1).Draw(t, "member")]
		return m.WorkerID, m.Incarnation + "-new", nil
	default:
		return "stranger", "s1", nil
	}
}

// drawEpoch returns an epoch near the interesting ones: the member's current and held epochs, the
// ring's last epoch, and their neighbours.
func drawEpoch(t *rapid.T, r *fsm.Ring, m *fsm.Member) uint64 {
	cands := []uint64{0, 1}
	if r != nil {
		cands = append(cands, r.LastEpoch, r.LastEpoch+1)
	}
	if m != nil {
		cands = append(cands, m.Epoch, m.Epoch+1)
		if m.Epoch > 0 {
			cands = append(cands, m.Epoch-1)
		}
		for _, h := range m.Holds {
			cands = append(cands, h.Epoch, h.Epoch+1)
		}
	}
	return rapid.SampledFrom(cands).Draw(t, "epoch")
}

// drawGeneration returns the ring's generation (an Expire decided now), an older one or zero.
func drawGeneration(t *rapid.T, r *fsm.Ring) uint64 {
	if r == nil {
		return rapid.Uint64Range(0, 3).Draw(t, "generation")
	}
	return rapid.SampledFrom([]uint64{0, r.Generation / 2, r.Generation, r.Generation + 1}).Draw(t, "generation")
}

func drawRanges(t *rapid.T) lease.Ranges {
	if rapid.Bool().Draw(t, "split_pieces") {
		n := rapid.IntRange(1, 5).Draw(t, "n")
		split := lease.Split(n)
		var out lease.Ranges
		for i := range split {
			if rapid.Bool().Draw(t, "piece") {
				out = append(out, split[i])
			}
		}
		return out
	}
	var out lease.Ranges
	for range rapid.IntRange(0, 3).Draw(t, "ranges") {
		a, b := rapid.Int64().Draw(t, "a"), rapid.Int64().Draw(t, "b")
		if a > b && rapid.IntRange(0, 9).Draw(t, "keep_inverted") > 0 {
			a, b = b, a
		}
		out = append(out, lease.Range{Start: a, End: b})
	}
	return out
}

// drawCommand draws a command of type typ against the state: mostly about members that exist, with
// epochs near the ones they have.
func drawCommand(t *rapid.T, s *fsm.State, typ fsm.CommandType) fsm.Command {
	k := rapid.SampledFrom([]lease.RingKey{ringA, ringB, ringNowhere}).Draw(t, "ring")
	r := s.Ring(k)
	w, inc, m := drawMemberRef(t, r)
	switch typ {
	case fsm.TypeRegisterCoordinator:
		id := fmt.Sprintf("c%d", rapid.IntRange(0, 2).Draw(t, "coordinator"))
		return &fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: id, RaftAddr: id + ":1", RSocketAddr: id + ":2", HTTPAddr: id + ":3"}}
	case fsm.TypeRemoveCoordinator:
		return &fsm.RemoveCoordinator{ID: fmt.Sprintf("c%d", rapid.IntRange(0, 2).Draw(t, "coordinator"))}
	case fsm.TypeJoin:
		return &fsm.Join{Ring: k, WorkerID: w, Incarnation: inc}
	case fsm.TypeDown:
		return &fsm.Down{Ring: k, WorkerID: w, Incarnation: inc}
	case fsm.TypeLeave:
		return &fsm.Leave{Ring: k, WorkerID: w, Incarnation: inc}
	case fsm.TypeRelease:
		return &fsm.Release{Ring: k, WorkerID: w, Incarnation: inc, Epoch: drawEpoch(t, r, m)}
	case fsm.TypeExpire:
		return &fsm.Expire{Ring: k, WorkerID: w, Incarnation: inc, UpTo: drawEpoch(t, r, m), Generation: drawGeneration(t, r)}
	case fsm.TypeAssign:
		if r != nil && rapid.Bool().Draw(t, "planned") {
			if plan := fsm.Plan(r); plan != nil {
				return plan
			}
		}
		a := &fsm.Assign{Ring: k}
		for range rapid.IntRange(1, 3).Draw(t, "assignments") {
			w, inc, m := drawMemberRef(t, r)
			count := rapid.IntRange(1, 4).Draw(t, "count")
			a.Assignments = append(a.Assignments, fsm.Assignment{
				WorkerID: w, Incarnation: inc, Epoch: drawEpoch(t, r, m),
				NodeIndex: rapid.IntRange(0, count-1).Draw(t, "index"), NodeCount: count, Ranges: drawRanges(t),
			})
		}
		return a
	case fsm.TypeReconcile:
		n := 0
		return drawPass(t, s, k, func() string { n++; return fmt.Sprintf("n%d", n) }, true)
	case fsm.TypeCommitTiming:
		return &fsm.CommitTiming{Timing: rapid.SampledFrom([]fsm.LeaseTiming{timing10s, timing3s}).Draw(t, "timing")}
	case fsm.TypeRetireTiming:
		timings := []fsm.LeaseTiming{timing10s, timing3s}
		return &fsm.RetireTiming{Retire: rapid.SampledFrom(timings).Draw(t, "retire"), Keep: rapid.SampledFrom(timings).Draw(t, "keep")}
	case fsm.TypePause:
		return &fsm.Pause{Ring: k, Impl: drawImpls(t), Reason: rapid.SampledFrom([]string{"", "deploy"}).Draw(t, "reason"), AtMs: drawAtMs(t)}
	case fsm.TypeResume:
		return &fsm.Resume{Ring: k, Impl: drawImpls(t), AtMs: drawAtMs(t)}
	case fsm.TypeLimit:
		if rapid.Bool().Draw(t, "clear") {
			return &fsm.Limit{Ring: k, Clear: true, AtMs: drawAtMs(t)}
		}
		return &fsm.Limit{Ring: k, PerSecond: rapid.SampledFrom([]float64{0.5, 10, 1e6}).Draw(t, "per_second"), AtMs: drawAtMs(t)}
	case fsm.TypeCordon:
		return &fsm.Cordon{Ring: k, WorkerID: w, Clear: rapid.Bool().Draw(t, "uncordon")}
	case fsm.TypeEpochFloor:
		floor := rapid.SampledFrom([]uint64{1, s.EpochFloor, s.EpochFloor + 1, 1 << 50}).Draw(t, "floor")
		switch rapid.IntRange(0, 2).Draw(t, "phase") {
		case 0:
			return &fsm.EpochFloor{Floor: max(floor, 1), Settle: true, Reason: "recover", AtMs: drawAtMs(t)}
		case 1:
			return &fsm.EpochFloor{Floor: max(floor, 1), Settled: true, AtMs: drawAtMs(t)}
		}
		return &fsm.EpochFloor{Floor: max(floor, 1), Reason: "upgrade", AtMs: drawAtMs(t)}
	case fsm.TypeSetMovement:
		if rapid.Bool().Draw(t, "contiguous") {
			return &fsm.SetMovement{Ring: k, Mode: fsm.ModeContiguous, AtMs: drawAtMs(t)}
		}
		return &fsm.SetMovement{Ring: k, Mode: fsm.ModeMinimal, Tolerance: rapid.SampledFrom([]float64{0, 0.1, 0.25}).Draw(t, "tolerance"),
			MaxRanges: rapid.SampledFrom([]int{0, 16, 20}).Draw(t, "max_ranges"), AtMs: drawAtMs(t)}
	case fsm.TypeHandOn:
		g := drawGeneration(t, r)
		if r != nil && len(r.Reservations()) > 0 && rapid.Bool().Draw(t, "reserved") {
			return &fsm.HandOn{Ring: k, WorkerID: rapid.SampledFrom(r.Reservations()).Draw(t, "slot").WorkerID, Generation: g}
		}
		return &fsm.HandOn{Ring: k, WorkerID: w, Generation: g}
	case fsm.TypeEvenOut:
		var step uint64
		if r != nil && r.Movement != nil {
			step = r.Movement.EvenOutSteps
		}
		return &fsm.EvenOut{Ring: k, Generation: drawGeneration(t, r), Step: rapid.SampledFrom([]uint64{step, step + 1}).Draw(t, "step")}
	case fsm.TypeInTerm:
		return nil // the State refuses it: only FSM.Apply knows the entry's term (term_test.go)
	}
	t.Fatalf("no generator for command type %d", typ)
	return nil
}

func drawImpls(t *rapid.T) []string {
	return rapid.SliceOfN(rapid.SampledFrom([]string{"payment", "shipping", "email"}), 0, 2).Draw(t, "impl")
}

func drawAtMs(t *rapid.T) int64 { return rapid.Int64Range(1, 1e13).Draw(t, "at_ms") }

// TestEveryCommandIsIdempotent applies commands of every type, twice, to states reached by generated
// histories: the second application changes nothing and succeeds when the first did (raft may apply
// a command that a new leader proposes again). A refused command changes nothing, and whatever is
// accepted keeps the state safe.
func TestEveryCommandIsIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA, ringB)
		for range rapid.IntRange(0, 80).Draw(t, "steps") {
			w.step(t)
		}
		for typ := fsm.TypeRegisterCoordinator; typ <= lastType; typ++ {
			c := drawCommand(t, w.st, typ)
			if c == nil {
				continue
			}
			s := w.st.Clone()
			before := stateJSON(t, s)
			if before != stateJSON(t, w.st) {
				t.Fatalf("Clone differs from the state")
			}
			err1 := s.Apply(c)
			once := stateJSON(t, s)
			if err1 != nil && once != before {
				t.Fatalf("%T %+v was refused (%v) but changed the state", c, c, err1)
			}
			if stateJSON(t, w.st) != before {
				t.Fatalf("applying to a clone changed the original")
			}
			err2 := s.Apply(c)
			if twice := stateJSON(t, s); twice != once {
				t.Fatalf("%T %+v is not idempotent:\nonce:  %s\ntwice: %s", c, c, once, twice)
			}
			if err1 == nil && err2 != nil {
				t.Fatalf("%T %+v succeeded once and failed the second time: %v", c, c, err2)
			}
			if err1 != nil && (err2 == nil || err2.Error() != err1.Error()) {
				t.Fatalf("%T: first refusal %v, second %v", c, err1, err2)
			}
			if err := checkStateSafety(s); err != nil {
				t.Fatalf("after %T %+v: %v", c, c, err)
			}
		}
	})
}
