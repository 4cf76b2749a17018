package fsm_test

import (
	"fmt"
	"math/big"
	"testing"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// tokens is the number of tokens of rs, exactly.
func tokens(rs lease.Ranges) *big.Int {
	n := new(big.Int)
	for _, r := range rs {
		n.Add(n, new(big.Int).SetUint64(r.Width()))
		n.Add(n, big.NewInt(1))
	}
	return n
}

var ringTokens = new(big.Int).Lsh(big.NewInt(1), 64)

// fractionOf is ringTokens × num / den, rounded up.
func fractionOf(num, den *big.Rat) *big.Int {
	v := new(big.Rat).Mul(new(big.Rat).SetInt(ringTokens), new(big.Rat).Quo(num, den))
	q, m := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func targetOf(r *fsm.Ring) map[string]lease.Ranges {
	out := map[string]lease.Ranges{}
	for _, s := range r.Movement.Target {
		out[s.WorkerID] = s.Ranges
	}
	return out
}

// moved is the number of tokens whose slot changed from before to after (what the slots of before
// lost).
func moved(before, after map[string]lease.Ranges) *big.Int {
	n := new(big.Int)
	for id, rs := range before {
		n.Add(n, tokens(rs.Subtract(after[id])))
	}
	return n
}

// withinTolerance reports whether every slot holds between (1−τ) and (1+τ) of the mean, and at most
// maxRanges ranges: the state the bounds of lease/minimal start from.
func withinTolerance(target map[string]lease.Ranges, tau float64, maxRanges int) bool {
	n := big.NewRat(int64(len(target)), 1)
	t := new(big.Rat).SetFloat64(tau)
	one := big.NewRat(1, 1)
	lo := fractionOf(new(big.Rat).Sub(one, t), n)
	lo.Sub(lo, big.NewInt(1))
	hi := fractionOf(new(big.Rat).Add(one, t), n)
	for _, rs := range target {
		s := tokens(rs)
		if s.Cmp(lo) < 0 || s.Cmp(hi) > 0 || len(rs) > maxRanges {
			return false
		}
	}
	return true
}

// TestMinimalModeBoundsOverGeneratedChanges: a ring of N workers, settled in the contiguous mode, is
// switched to the minimal mode (which moves nothing) and then goes through generated joins,
// rolling restarts and crashes, each settled by the leader (releases, expiries, hand-on, plans)
// before the next. Checked against a naive model of ownership by token counts:
//   - the switch moves nothing and gives no member a new epoch;
//   - a join from a target within τ moves at most 1/(N+1) + τ/N of the ring (plus one token),
//     leaves every slot within τ of the new mean, and gives a new epoch only to the members whose
//     slot changed: the newcomer and its donors, not every member although the count changed;
//   - a rolling restart (down, then a new incarnation of the id) moves nothing, and only the
//     restarted worker gets new epochs;
//   - a crash handed on moves exactly the leaver's tokens;
//   - once settled, the members hold exactly the target, which covers the ring (checkSettledMinimal).
func TestMinimalModeBoundsOverGeneratedChanges(t *testing.T) {
	joins, checkedJoins := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA)
		n := rapid.IntRange(1, 12).Draw(t, "n")
		next := 0
		newID := func() string { next++; return fmt.Sprintf("w%d", next) }
		for range n {
			w.mustApply(t, &fsm.Join{Ring: ringA, WorkerID: newID(), Incarnation: "i0"})
		}
		w.settle(t, ringA)
		epochs := func() map[string]uint64 {
			out := map[string]uint64{}
			for _, m := range w.st.Ring(ringA).ActiveMembers() {
				out[m.WorkerID] = m.Epoch
			}
			return out
		}
		before := epochs()
		tau := rapid.SampledFrom([]float64{0.1, 0.25}).Draw(t, "tolerance")
		w.mustApply(t, &fsm.SetMovement{Ring: ringA, Mode: fsm.ModeMinimal, Tolerance: tau})
		w.minimal = true
		if plan := fsm.Plan(w.st.Ring(ringA)); plan != nil {
			t.Fatalf("switching a settled ring to the minimal mode planned %+v", plan.Assignments)
		}
		if err := checkSettledMinimal(w.st.Ring(ringA)); err != nil {
			t.Fatalf("after the switch: %v", err)
		}
		inc := 0
		for range rapid.IntRange(1, 8).Draw(t, "changes") {
			r := w.st.Ring(ringA)
			cfg := r.Movement
			old := targetOf(r)
			before = epochs()
			active := r.ActiveMembers()
			switch ev := rapid.IntRange(0, 2).Draw(t, "event"); {
			case ev == 0 || len(active) < 2:
				id := newID()
				w.mustApply(t, &fsm.Join{Ring: ringA, WorkerID: id, Incarnation: "i0"})
				after := targetOf(w.st.Ring(ringA))
				joins++
				w.settle(t, ringA)
				if !withinTolerance(old, cfg.Tolerance, cfg.Config().MergeAbove) {
					break // the bounds hold from a target within τ
				}
				checkedJoins++
				nOld := big.NewRat(int64(len(old)), 1)
				bound := new(big.Rat).Add(new(big.Rat).Inv(new(big.Rat).Add(nOld, big.NewRat(1, 1))), new(big.Rat).Quo(new(big.Rat).SetFloat64(cfg.Tolerance), nOld))
				limit := fractionOf(bound, big.NewRat(1, 1))
				limit.Add(limit, big.NewInt(1))
				if got := moved(old, after); got.Cmp(limit) > 0 {
					t.Fatalf("a join into %d moved %v tokens, more than 1/(N+1)+τ/N = %v", len(old), got, limit)
				}
				if !withinTolerance(after, cfg.Tolerance, cfg.MaxRanges) {
					t.Fatalf("after a join from a target within τ, a slot is outside τ: %v", after)
				}
				for other, e := range epochs() {
					if before[other] != 0 && old[other].Equal(after[other]) && e != before[other] {
						t.Fatalf("%s kept its ranges across the join of %s but got epoch %d (was %d)", other, id, e, before[other])
					}
				}
			case ev == 1:
				m := active[rapid.IntRange(0, len(active)-1).Draw(t, "restart")]
				inc++
				w.mustApply(t, &fsm.Down{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
				w.mustApply(t, &fsm.Join{Ring: ringA, WorkerID: m.WorkerID, Incarnation: fmt.Sprintf("r%d", inc)})
				w.settle(t, ringA)
				after := targetOf(w.st.Ring(ringA))
				if got := moved(old, after); got.Sign() != 0 {
					t.Fatalf("a rolling restart of %s moved %v tokens", m.WorkerID, got)
				}
				for id, e := range epochs() {
					if id != m.WorkerID && e != before[id] {
						t.Fatalf("the restart of %s gave %s epoch %d (was %d)", m.WorkerID, id, e, before[id])
					}
				}
			default:
				m := active[rapid.IntRange(0, len(active)-1).Draw(t, "crash")]
				w.mustApply(t, &fsm.Down{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
				w.settle(t, ringA)
				after := targetOf(w.st.Ring(ringA))
				if _, still := after[m.WorkerID]; still {
					t.Fatalf("the crashed %s still has a slot after the hand-on", m.WorkerID)
				}
				if got, want := moved(old, after), tokens(old[m.WorkerID]); got.Cmp(want) != 0 {
					t.Fatalf("handing on %s moved %v tokens, want its own %v", m.WorkerID, got, want)
				}
			}
			if err := checkSettledMinimal(w.st.Ring(ringA)); err != nil {
				t.Fatalf("%v", err)
			}
		}
	})
	t.Logf("%d joins, %d of them from a target within τ and checked against the bounds", joins, checkedJoins)
}

// pieces counts the ranges that changed slot from before to after: one move of lease/minimal
// each (one handover, one re-scan), as the naive model sees them.
func pieces(before, after map[string]lease.Ranges) int {
	n := 0
	for from, rs := range before {
		for to, got := range after {
			if from != to {
				n += len(rs.Intersect(got))
			}
		}
	}
	return n
}

// TestEvenOutStepsUnderTheChurnBudget: a minimal-mode ring built by generated joins and crashes
// (within the tolerance, not equal) is evened out by EvenOut steps, each applied only once the ring
// is settled and each moving at most max(StepMoves, N−1) ranges, until every share is within one
// token of every other and no member holds more than MergeAbove ranges; the members then hold
// exactly the target. A step applied again, decided on an older generation, or applied while a
// step is in flight changes nothing.
func TestEvenOutStepsUnderTheChurnBudget(t *testing.T) {
	steps := 0
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA)
		w.startMinimal(t)
		next := 0
		for range rapid.IntRange(2, 10).Draw(t, "n") {
			next++
			w.mustApply(t, &fsm.Join{Ring: ringA, WorkerID: fmt.Sprintf("w%d", next), Incarnation: "i0"})
			w.settle(t, ringA)
		}
		if active := w.st.Ring(ringA).ActiveMembers(); len(active) > 2 && rapid.Bool().Draw(t, "crash") {
			m := active[rapid.IntRange(0, len(active)-1).Draw(t, "crashed")]
			w.mustApply(t, &fsm.Down{Ring: ringA, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
			w.settle(t, ringA)
		}
		cfg := w.st.Ring(ringA).Movement.Config()
		for round := 0; !w.st.Ring(ringA).EvenedOut(); round++ {
			if round > 500 {
				t.Fatalf("no even ring after 500 steps:\n%s", describeRing(w.st.Ring(ringA)))
			}
			r := w.st.Ring(ringA)
			step := &fsm.EvenOut{Ring: ringA, Generation: r.Generation, Step: r.Movement.EvenOutSteps}
			before := targetOf(r)
			w.mustApply(t, step)
			after := targetOf(w.st.Ring(ringA))
			if moved := pieces(before, after); moved == 0 || moved > max(cfg.StepMoves, len(after)-1) {
				t.Fatalf("an even-out step moved %d ranges, budget %d", moved, max(cfg.StepMoves, len(after)-1))
			}
			steps++
			// Applied again, or while its moves are in flight, or decided on an older generation:
			// nothing changes.
			once := stateJSON(t, w.st)
			for _, again := range []*fsm.EvenOut{step, {Ring: ringA, Generation: r.Generation, Step: step.Step + 1}, {Ring: ringA, Generation: r.Generation - 1, Step: step.Step + 1}} {
				w.mustApply(t, again)
				if stateJSON(t, w.st) != once {
					t.Fatalf("%+v changed the state", again)
				}
			}
			w.settle(t, ringA)
			if err := checkSettledMinimal(w.st.Ring(ringA)); err != nil {
				t.Fatalf("after an even-out step: %v", err)
			}
		}
		target := targetOf(w.st.Ring(ringA))
		lo, hi := new(big.Int).Lsh(big.NewInt(1), 65), new(big.Int)
		for id, rs := range target {
			if len(rs) > cfg.MergeAbove {
				t.Fatalf("%s holds %d ranges once even, more than %d", id, len(rs), cfg.MergeAbove)
			}
			s := tokens(rs)
			if s.Cmp(lo) < 0 {
				lo = s
			}
			if s.Cmp(hi) > 0 {
				hi = s
			}
		}
		if d := new(big.Int).Sub(hi, lo); d.Cmp(big.NewInt(1)) > 0 {
			t.Fatalf("shares differ by %v tokens once even", d)
		}
	})
	t.Logf("%d even-out steps in all runs", steps)
}
