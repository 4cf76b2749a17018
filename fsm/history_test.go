package fsm_test

import (
	"testing"

	"pgregory.net/rapid"
)

// TestGeneratedHistories drives the state through generated histories of joins, restarts,
// reconnects, crashes, leaves, releases, expiries, plans, cordons and stale replays on two rings, each
// command applied to the state it was decided on, and checks exclusivity, Node-0 uniqueness, the
// worker's view and monotone epochs after every step. Then it lets every ring settle and checks
// invariant 1 (coverage) and that settling takes few rounds.
func TestGeneratedHistories(t *testing.T) {
	runHistories(t, false)
}

// TestGeneratedHistoriesWithProposalLag is the same with proposals in flight: the leader decides on
// the applied state while earlier proposals wait in the log, so a plan may be stale when it is
// applied (and may be refused), and an Expire may land after a reconnect and renewals.
func TestGeneratedHistoriesWithProposalLag(t *testing.T) {
	runHistories(t, true)
}

// TestGeneratedHistoriesInMinimalMode is the same with both rings in the minimal movement mode
// from the start, proposals lagging or not, the leader handing on reserved slots, and an operator
// switching a ring's mode back and forth mid-history: exclusivity, Node-0 and the worker's view
// after every step, and once settled, coverage by the target (checkSettledMinimal).
func TestGeneratedHistoriesInMinimalMode(t *testing.T) {
	for _, lag := range []bool{false, true} {
		runHistoriesIn(t, lag, true)
	}
}

func runHistories(t *testing.T, lag bool) { runHistoriesIn(t, lag, false) }

func runHistoriesIn(t *testing.T, lag, minimal bool) {
	maxRounds, totalSteps, accepted, cordoned, minimalRings := 0, 0, 0, 0, 0
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(ringA, ringB)
		w.lag = lag
		if minimal {
			w.startMinimal(t)
		}
		steps := rapid.IntRange(1, 600).Draw(t, "steps")
		for range steps {
			w.step(t)
		}
		totalSteps += steps
		for _, k := range w.rings {
			rounds := w.settle(t, k)
			maxRounds = max(maxRounds, rounds)
			if rounds > 3 {
				t.Fatalf("ring %s took %d plan rounds to settle", k, rounds)
			}
			r := w.st.Ring(k)
			if r == nil {
				continue
			}
			check := checkSettledCoverage
			if r.Movement != nil {
				check = checkSettledMinimal
				minimalRings++
			}
			if err := check(r); err != nil {
				t.Fatalf("%v", err)
			}
			if len(r.Cordoned) > 0 {
				cordoned++
			}
			if len(r.Members) != len(r.ActiveMembers()) {
				t.Fatalf("ring %s settled with departed members left: %s", k, describeRing(r))
			}
		}
		accepted += len(w.assigns)
	})
	t.Logf("%d steps, %d accepted assigns in all runs; most plan rounds needed to settle: %d; rings settled with a cordon: %d, in the minimal mode: %d",
		totalSteps, accepted, maxRounds, cordoned, minimalRings)
}
