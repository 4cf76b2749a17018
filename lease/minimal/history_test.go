package minimal_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// checkCoverage fails unless every token of the ring has exactly one owner (invariant 1's
// coverage, with no gap and no overlap), every member holds at most k ranges, and the ids are
// unique.
func checkCoverage(t *rapid.T, a minimal.Assignment, k int) {
	seen := map[string]bool{}
	for _, m := range a.Members {
		if seen[m.ID] {
			t.Fatalf("id %s twice:\n%v", m.ID, a)
		}
		seen[m.ID] = true
		if len(m.Ranges) > k {
			t.Fatalf("%s holds %d ranges, more than k = %d:\n%v", m.ID, len(m.Ranges), k, a)
		}
		if !lease.Normalize(m.Ranges).Equal(m.Ranges) {
			t.Fatalf("%s's ranges %v are not normalized", m.ID, m.Ranges)
		}
	}
	if len(a.Members) == 0 {
		return
	}
	for _, at := range atomsOf(a) {
		if o := owners(a, at.start); len(o) != 1 {
			t.Fatalf("token %d has owners %v, want exactly one:\n%v", at.start, o, a)
		}
	}
}

// checkMoves fails unless the moves, applied one by one to before, each take a range its From
// holds at that point, and lead to after's owners; it returns the tokens they moved in all.
func checkMoves(t *rapid.T, before, after minimal.Assignment, moves []minimal.Move) *big.Int {
	total := new(big.Int)
	if len(before.Members) == 0 {
		return total // the first member's ring comes from nobody
	}
	own := before.Owners()
	for _, mv := range moves {
		piece := lease.Ranges{mv.Range}
		if !own[mv.From].Intersect(piece).Equal(piece) {
			t.Fatalf("move %v: %s does not hold it (holds %v)", mv, mv.From, own[mv.From])
		}
		own[mv.From] = own[mv.From].Subtract(piece)
		own[mv.To] = own[mv.To].Union(piece)
		total.Add(total, new(big.Int).Add(new(big.Int).SetUint64(mv.Range.Width()), big.NewInt(1)))
	}
	for _, m := range after.Members {
		if !own[m.ID].Equal(m.Ranges) {
			t.Fatalf("moves %v lead %s to %v, the assignment says %v", moves, m.ID, own[m.ID], m.Ranges)
		}
	}
	if got := moved(before, after); got.Cmp(total) > 0 {
		t.Fatalf("%v tokens changed owner, the moves say %v", got, total)
	}
	return total
}

// modelBounds are the shares a member may hold among n right after a change, in tokens:
// ⌊(1−τ)·2^64/n⌋ and ⌈(1+τ)·2^64/n⌉.
func modelBounds(n int, tau float64) (lo, hi *big.Int) {
	mean := new(big.Rat).SetFrac(ring, big.NewInt(int64(n)))
	tr := new(big.Rat).SetFloat64(tau)
	l := new(big.Rat).Mul(mean, new(big.Rat).Sub(big.NewRat(1, 1), tr))
	h := new(big.Rat).Mul(mean, new(big.Rat).Add(big.NewRat(1, 1), tr))
	lo = new(big.Int).Quo(l.Num(), l.Denom())
	hi, rem := new(big.Int).QuoRem(h.Num(), h.Denom(), new(big.Int))
	if rem.Sign() != 0 {
		hi.Add(hi, big.NewInt(1))
	}
	return lo, hi
}

// outside lists the active members that hold fewer than ⌊(1−τ)·2^64/n⌋ or more than
// ⌈(1+τ)·2^64/n⌉ tokens, n counting the members that left and are still reserved.
func outside(a minimal.Assignment, tau float64) []string {
	if len(a.Members) < 2 {
		return nil
	}
	loInt, hiInt := modelBounds(len(a.Members), tau)
	s := shares(a)
	var out []string
	for _, m := range a.Members {
		if v := s[m.ID]; m.Active() && (v.Cmp(loInt) < 0 || v.Cmp(hiInt) > 0) {
			f, _ := ratio(v).Float64()
			out = append(out, fmt.Sprintf("%s (%.5f)", m.ID, f))
		}
	}
	return out
}

// checkBalance fails unless every active member is within τ of the mean (see outside).
func checkBalance(t *rapid.T, what string, a minimal.Assignment, tau float64) {
	if out := outside(a, tau); len(out) > 0 {
		t.Fatalf("after %s: %v outside %v ± %v of the mean:\n%v", what, out, 1/float64(len(a.Members)), tau, a)
	}
}

// balanced reports whether a is a state the bounds of a change start from: every member active,
// within τ of the mean, and holding at most MergeAbove ranges (what an idle ring reaches).
func balanced(a minimal.Assignment, cfg minimal.Config) bool {
	_, reserved := split(a)
	for _, m := range a.Members {
		if len(m.Ranges) > cfg.MergeAbove {
			return false
		}
	}
	return len(reserved) == 0 && len(outside(a, cfg.Tolerance)) == 0
}

// history drives a planner through generated joins, leaves, returns, expiries and idle spells,
// checking every bound of the package doc after each step against the naive model.
func history(t *rapid.T, cfg minimal.Config, steps int) {
	p, err := minimal.NewPlanner(cfg)
	if err != nil {
		t.Fatalf("NewPlanner: %v", err)
	}
	cfg = p.Config()
	var a minimal.Assignment
	now := time.Unix(0, 0)
	next := 0
	leftWith := map[string]lease.Ranges{} // ranges of each reserved member when it left
	// evenAtLeave: the ring was balanced when the member left and nothing changed since, so the
	// bounds hold when its reservation runs out.
	evenAtLeave := map[string]bool{}
	for range steps {
		active, reserved := split(a)
		even := balanced(a, cfg)
		op := rapid.IntRange(0, 9).Draw(t, "op")
		switch {
		case op <= 3 || len(active) == 0: // join of a new id
			id := fmt.Sprintf("w%d", next)
			next++
			clear(evenAtLeave)
			before := a
			var moves []minimal.Move
			a, moves, err = p.Join(a, id)
			if err != nil {
				t.Fatalf("join %s: %v", id, err)
			}
			checkCoverage(t, a, cfg.MaxRanges)
			total := checkMoves(t, before, a, moves)
			for _, mv := range moves {
				if mv.To != id {
					t.Fatalf("join of %s moved %v to another member", id, mv)
				}
			}
			checkIndexesKept(t, before, a)
			if n := len(before.Members); n > 0 && even {
				// 1/(N+1) + τ/N of the ring, in tokens, rounded up.
				bound := new(big.Rat).Add(big.NewRat(1, int64(n+1)), new(big.Rat).Quo(new(big.Rat).SetFloat64(cfg.Tolerance), big.NewRat(int64(n), 1)))
				bound.Mul(bound, new(big.Rat).SetInt(ring))
				if new(big.Rat).SetInt(total).Cmp(bound) > 0 {
					f, _ := ratio(total).Float64()
					t.Fatalf("join of %s to %d members moved %.5f of the ring, above 1/(N+1)+τ/N", id, n, f)
				}
				checkBalance(t, "join of "+id, a, cfg.Tolerance)
				checkDonors(t, before, moves)
				checked.joins++
			}
		case op <= 5: // leave
			id := rapid.SampledFrom(active).Draw(t, "leaver")
			before := a
			leftWith[id] = a.Members[a.Index(id)].Ranges
			clear(evenAtLeave)
			evenAtLeave[id] = even
			var moves []minimal.Move
			a, moves, err = p.Leave(a, id, now)
			if err != nil {
				t.Fatalf("leave %s: %v", id, err)
			}
			checkCoverage(t, a, cfg.MaxRanges)
			checkMoves(t, before, a, moves)
			if cfg.ReturnDelay >= 0 {
				if len(moves) > 0 {
					t.Fatalf("leave of %s within its delay moved %v", id, moves)
				}
				checkIndexesKept(t, before, a)
			} else if len(active) > 1 && len(reserved) == 0 {
				checkHandOn(t, before, a, moves, id)
				if even {
					checkBalance(t, "leave of "+id, a, cfg.Tolerance)
					checkReceivers(t, before, moves, cfg.Tolerance)
					checked.leaves++
				}
			}
		case op == 6 && len(reserved) > 0: // a new incarnation comes back within the delay
			id := rapid.SampledFrom(reserved).Draw(t, "returner")
			before := a
			var moves []minimal.Move
			a, moves, err = p.Join(a, id)
			if err != nil {
				t.Fatalf("return of %s: %v", id, err)
			}
			checked.returns++
			if len(moves) > 0 || !a.Members[a.Index(id)].Ranges.Equal(leftWith[id]) || a.Index(id) != before.Index(id) {
				t.Fatalf("return of %s moved %v; it holds %v at index %d, it left with %v at %d",
					id, moves, a.Members[a.Index(id)].Ranges, a.Index(id), leftWith[id], before.Index(id))
			}
			checkCoverage(t, a, cfg.MaxRanges)
		case op == 7 && len(reserved) > 0: // the delay runs out
			now = now.Add(cfg.ReturnDelay)
			before := a
			var moves []minimal.Move
			a, moves = p.Expire(a, now)
			checkCoverage(t, a, cfg.MaxRanges)
			checkMoves(t, before, a, moves)
			if len(reserved) == 1 && len(active) > 0 {
				checkHandOn(t, before, a, moves, reserved[0])
				if evenAtLeave[reserved[0]] {
					checkBalance(t, "expiry of "+reserved[0], a, cfg.Tolerance)
					checkReceivers(t, before, moves, cfg.Tolerance)
					checked.leaves++
				}
			}
		default: // idle long enough to even out
			now = now.Add(cfg.ReturnDelay)
			a, _ = p.Expire(a, now)
			checkCoverage(t, a, cfg.MaxRanges)
			evenOut(t, p, a)
			a = settle(t, p, a)
			checked.settles++
		}
		now = now.Add(time.Second)
	}
}

// checked counts the bounds checked, so that a test can tell they were not vacuous.
var checked struct{ joins, leaves, returns, settles int }

// checkDonors fails unless the join took from the most loaded: no member that gave nothing held
// more than one that gave.
func checkDonors(t *rapid.T, before minimal.Assignment, moves []minimal.Move) {
	s := shares(before)
	gave := map[string]bool{}
	for _, mv := range moves {
		gave[mv.From] = true
	}
	for d := range gave {
		for _, m := range before.Members {
			if !gave[m.ID] && s[m.ID].Cmp(s[d]) > 0 {
				t.Fatalf("the join took from %s (%v tokens), not from %s (%v)", d, s[d], m.ID, s[m.ID])
			}
		}
	}
}

// checkReceivers fails unless the hand-on gave to the least loaded: every member that received
// was under the upper bound of the ring without the leaver, and every member under its lower
// bound received.
func checkReceivers(t *rapid.T, before minimal.Assignment, moves []minimal.Move, tau float64) {
	var leaver string
	got := map[string]bool{}
	for _, mv := range moves {
		leaver, got[mv.To] = mv.From, true
	}
	if leaver == "" {
		return
	}
	n := len(before.Members) - 1
	if n < 2 {
		return
	}
	lo, hi := modelBounds(n, tau)
	for id, v := range shares(before) {
		if id == leaver {
			continue
		}
		if got[id] && v.Cmp(hi) >= 0 {
			t.Fatalf("the hand-on of %s gave to %s, which held %v tokens, at or above the upper bound", leaver, id, v)
		}
		if !got[id] && v.Cmp(lo) < 0 {
			t.Fatalf("the hand-on of %s gave nothing to %s, which held %v tokens, under the lower bound", leaver, id, v)
		}
	}
}

func split(a minimal.Assignment) (active, reserved []string) {
	for _, m := range a.Members {
		if m.Active() {
			active = append(active, m.ID)
		} else {
			reserved = append(reserved, m.ID)
		}
	}
	return active, reserved
}

// checkIndexesKept fails unless every member of before has its node index in after.
func checkIndexesKept(t *rapid.T, before, after minimal.Assignment) {
	for i, m := range before.Members {
		if after.Index(m.ID) != i {
			t.Fatalf("%s moved from node index %d to %d", m.ID, i, after.Index(m.ID))
		}
	}
}

// checkHandOn fails unless only the leaver's tokens moved, all of them, and at most one member
// (the one of the highest index, into the leaver's) changed node index.
func checkHandOn(t *rapid.T, before, after minimal.Assignment, moves []minimal.Move, leaver string) {
	if after.Index(leaver) >= 0 {
		t.Fatalf("%s is still a member after its hand-on", leaver)
	}
	for _, mv := range moves {
		if mv.From != leaver {
			t.Fatalf("hand-on of %s moved %v", leaver, mv)
		}
	}
	left := before.Members[before.Index(leaver)].Ranges
	if got, want := moved(before, after), shares(before)[leaver]; got.Cmp(want) != 0 {
		t.Fatalf("hand-on of %s moved %v tokens, it held %v (%v)", leaver, got, want, left)
	}
	changed := 0
	for i, m := range before.Members {
		if m.ID != leaver && after.Index(m.ID) != i {
			changed++
			if i != len(before.Members)-1 || after.Index(m.ID) != before.Index(leaver) {
				t.Fatalf("%s moved from node index %d to %d", m.ID, i, after.Index(m.ID))
			}
		}
	}
	if changed > 1 {
		t.Fatalf("%d members changed node index", changed)
	}
}

// evenOut runs one step and checks it: coverage, the budget, and no range added to anyone.
func evenOut(t *rapid.T, p *minimal.Planner, a minimal.Assignment) (minimal.Assignment, []minimal.Move) {
	cfg := p.Config()
	after, moves := p.EvenOut(a)
	checkCoverage(t, after, cfg.MaxRanges)
	checkMoves(t, a, after, moves)
	if len(moves) > max(cfg.StepMoves, len(a.Members)-1) {
		t.Fatalf("one even-out step made %d moves, budget %d, %d members", len(moves), cfg.StepMoves, len(a.Members))
	}
	for _, m := range a.Members {
		if n := len(after.Members[after.Index(m.ID)].Ranges); n > max(len(m.Ranges), cfg.MergeAbove) {
			t.Fatalf("even-out took %s from %d ranges to %d", m.ID, len(m.Ranges), n)
		}
	}
	checkIndexesKept(t, a, after)
	return after, moves
}

// settle runs even-out steps until none moves anything, and checks that the ring is then even
// within one token with at most MergeAbove ranges per member.
func settle(t *rapid.T, p *minimal.Planner, a minimal.Assignment) minimal.Assignment {
	const maxSteps = 10000
	for step := 0; ; step++ {
		if step == maxSteps {
			t.Fatalf("not settled after %d even-out steps:\n%v", maxSteps, a)
		}
		var moves []minimal.Move
		a, moves = evenOut(t, p, a)
		if len(moves) == 0 {
			break
		}
	}
	if !p.Settled(a) {
		t.Fatalf("even-out stopped on an unsettled ring:\n%v", a)
	}
	s := shares(a)
	lo, hi := new(big.Int).Set(ring), new(big.Int)
	for _, m := range a.Members {
		if s[m.ID].Cmp(lo) < 0 {
			lo.Set(s[m.ID])
		}
		if s[m.ID].Cmp(hi) > 0 {
			hi.Set(s[m.ID])
		}
		if len(m.Ranges) > p.Config().MergeAbove {
			t.Fatalf("settled with %s holding %d ranges, above %d", m.ID, len(m.Ranges), p.Config().MergeAbove)
		}
	}
	if len(a.Members) > 0 && new(big.Int).Sub(hi, lo).Cmp(big.NewInt(1)) > 0 {
		t.Fatalf("settled with shares from %v to %v tokens:\n%v", lo, hi, a)
	}
	return a
}

func TestHistoriesKeepEveryBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := minimal.Config{
			Tolerance: rapid.SampledFrom([]float64{0.05, 0.1, 0.2, 0.5}).Draw(t, "tau"),
			StepMoves: rapid.IntRange(1, 10).Draw(t, "step_moves"),
		}
		cfg.MaxRanges = cfg.JoinPieces() + rapid.IntRange(0, 10).Draw(t, "k_extra")
		if rapid.Bool().Draw(t, "no_delay") {
			cfg.ReturnDelay = -1
		}
		history(t, cfg, rapid.IntRange(1, 60).Draw(t, "steps"))
	})
	t.Logf("bounds checked after %d joins, %d leaves, %d returns, %d idle spells", checked.joins, checked.leaves, checked.returns, checked.settles)
	if checked.joins == 0 || checked.leaves == 0 || checked.returns == 0 || checked.settles == 0 {
		t.Errorf("a bound was never checked: %+v", checked)
	}
}
