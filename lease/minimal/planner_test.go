package minimal_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

func TestConfigValidateSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		cfg  minimal.Config
		want string
	}{
		{minimal.Config{Tolerance: -0.1}, "minimal: bad config: tolerance -0.1 is not in (0, 0.5]"},
		{minimal.Config{Tolerance: 0.6}, "minimal: bad config: tolerance 0.6 is not in (0, 0.5]"},
		{minimal.Config{Tolerance: math.NaN()}, "minimal: bad config: tolerance NaN is not in (0, 0.5]"},
		{minimal.Config{MaxRanges: 11}, "minimal: bad config: max ranges 11 is below ⌈1/τ⌉+2 = 12, the pieces a join may take"},
		{minimal.Config{MergeAbove: 17}, "minimal: bad config: merge above 17 is not in [1, max ranges 16]"},
		{minimal.Config{MergeAbove: -1}, "minimal: bad config: merge above -1 is not in [1, max ranges 16]"},
		{minimal.Config{StepMoves: -1}, "minimal: bad config: step moves -1 is below 1"},
		{minimal.Config{Idle: -time.Second}, "minimal: bad config: idle -1s is negative"},
	} {
		_, err := minimal.NewPlanner(tc.cfg)
		if !errors.Is(err, minimal.ErrConfig) || err.Error() != tc.want {
			t.Errorf("NewPlanner(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	p, err := minimal.NewPlanner(minimal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := minimal.Config{Tolerance: 0.1, MaxRanges: 16, MergeAbove: 8, ReturnDelay: 10 * time.Second, StepMoves: 8, Idle: 10 * time.Second}
	if got := p.Config(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
}

func TestJoinAndLeaveRefuseTheWrongMember(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{})
	a, _, _ := p.Join(minimal.Assignment{}, "w1")
	if _, _, err := p.Join(a, "w1"); !errors.Is(err, minimal.ErrActiveMember) || err.Error() != `minimal: already an active member: join of "w1"` {
		t.Errorf("second join of w1: %v", err)
	}
	if _, _, err := p.Leave(a, "w2", time.Unix(0, 0)); !errors.Is(err, minimal.ErrNotMember) || err.Error() != `minimal: not an active member: leave of "w2"` {
		t.Errorf("leave of w2: %v", err)
	}
	a, _, _ = p.Leave(a, "w1", time.Unix(0, 0))
	if _, _, err := p.Leave(a, "w1", time.Unix(1, 0)); !errors.Is(err, minimal.ErrNotMember) {
		t.Errorf("second leave of w1: %v", err)
	}
}

// settled builds a ring of n members joined one by one and evened out.
func settled(t *testing.T, p *minimal.Planner, n int) minimal.Assignment {
	t.Helper()
	var a minimal.Assignment
	for i := range n {
		var err error
		if a, _, err = p.Join(a, fmt.Sprintf("w%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 10000 {
		var moves []minimal.Move
		if a, moves = p.EvenOut(a); len(moves) == 0 {
			return a
		}
	}
	t.Fatalf("%d members not settled after 10000 steps", n)
	return a
}

// TestRollingRestartMovesNothing: every member of a settled ring of 10 leaves and comes back
// within the delay, one after the other; no token moves, no node index changes.
func TestRollingRestartMovesNothing(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{})
	a := settled(t, p, 10)
	start := a
	now := time.Unix(1000, 0)
	for _, m := range start.Members {
		var moves []minimal.Move
		a, moves, _ = p.Leave(a, m.ID, now)
		now = now.Add(p.Config().ReturnDelay - time.Nanosecond)
		var expired []minimal.Move
		if a, expired = p.Expire(a, now); len(expired) > 0 {
			t.Fatalf("expiry before the delay moved %v", expired)
		}
		var back []minimal.Move
		a, back, _ = p.Join(a, m.ID)
		if len(moves)+len(back) > 0 {
			t.Fatalf("restart of %s moved %v %v", m.ID, moves, back)
		}
	}
	if a.String() != start.String() {
		t.Fatalf("after the rolling restart:\n%vwant\n%v", a, start)
	}
}

// TestExpireHandsOnAtTheDelay: a reservation holds until LeftAt + ReturnDelay, then only the
// leaver's tokens move, and the member of the highest index takes the leaver's.
func TestExpireHandsOnAtTheDelay(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{ReturnDelay: 5 * time.Second})
	a := settled(t, p, 4)
	left := time.Unix(100, 0)
	a, _, _ = p.Leave(a, "w1", left)
	if due, ok := p.Due(a); !ok || !due.Equal(left.Add(5*time.Second)) {
		t.Fatalf("Due = %v %v, want %v", due, ok, left.Add(5*time.Second))
	}
	if b, moves := p.Expire(a, left.Add(5*time.Second-1)); len(moves) > 0 || b.Index("w1") != 1 {
		t.Fatalf("Expire a nanosecond early moved %v", moves)
	}
	b, moves := p.Expire(a, left.Add(5*time.Second))
	if len(moves) == 0 || b.Index("w1") >= 0 {
		t.Fatalf("Expire at the delay: moves %v, w1 at %d", moves, b.Index("w1"))
	}
	if got := []string{b.Members[0].ID, b.Members[1].ID, b.Members[2].ID}; strings.Join(got, " ") != "w0 w3 w2" {
		t.Fatalf("node indexes after w1's hand-on: %v, want w0 w3 w2 (w3 takes index 1)", got)
	}
	if _, ok := p.Due(b); ok {
		t.Fatal("Due after the hand-on says a reservation is left")
	}
}

// TestLastMemberKeepsItsReservation: the last active member that leaves keeps its ranges
// reserved, even without a delay, since nobody could take them; a newcomer takes them at expiry.
func TestLastMemberKeepsItsReservation(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{ReturnDelay: -1})
	a, _, _ := p.Join(minimal.Assignment{}, "w0")
	a, moves, _ := p.Leave(a, "w0", time.Unix(0, 0))
	if len(moves) > 0 || len(a.Members) != 1 || !a.Members[0].Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("the last leave: moves %v, ring\n%v", moves, a)
	}
	a, moves, _ = p.Join(a, "w1")
	if len(moves) > 0 {
		t.Fatalf("a join to a ring of reservations took %v", moves)
	}
	a, moves = p.Expire(a, time.Unix(0, 0))
	if len(moves) != 1 || len(a.Members) != 1 || a.Members[0].ID != "w1" || !a.Members[0].Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("expiry: moves %v, ring\n%v", moves, a)
	}
}

// contiguous is today's split as an Assignment: Split(n) among w0..w(n-1) in join order.
func contiguous(n int) minimal.Assignment {
	var a minimal.Assignment
	for i, r := range lease.Split(n) {
		a.Members = append(a.Members, minimal.Member{ID: fmt.Sprintf("w%d", i), Ranges: lease.Ranges{r}})
	}
	return a
}

// TestContiguousSplitMovesHalfPerJoin: with today's split, a join at the last place moves half
// of the ring whatever N (worker i keeps (i+1)/(N+1) − i/N of its range), where the minimal mode
// moves at most 1/(N+1) + τ/N; the comparison of docs/benchmarks.md rests on both.
func TestContiguousSplitMovesHalfPerJoin(t *testing.T) {
	half := new(big.Rat).SetFrac64(1, 2)
	p, _ := minimal.NewPlanner(minimal.Config{})
	for n := 1; n <= 100; n++ {
		got := ratio(moved(contiguous(n), contiguous(n+1)))
		if diff, _ := new(big.Rat).Sub(got, half).Float64(); math.Abs(diff) > 1e-15 {
			t.Fatalf("contiguous join at N = %d moved %v of the ring, want 1/2", n, got.FloatString(18))
		}
		if n != 3 && n != 10 && n != 30 && n != 100 {
			continue
		}
		before := settled(t, p, n)
		after, _, _ := p.Join(before, "new")
		m, _ := ratio(moved(before, after)).Float64()
		bound := 1/float64(n+1) + p.Config().Tolerance/float64(n)
		if m > bound || m >= 0.5 {
			t.Errorf("minimal join at N = %d moved %.4f of the ring, bound %.4f, contiguous 0.5", n, m, bound)
		}
		t.Logf("N = %3d: a join moves %.4f of the ring (minimal), 0.5 (contiguous)", n, m)
	}
}

// TestEvenOutWaitsForReservations: a ring with a reservation pending is not idle: EvenOut moves
// nothing and Settled says no, whatever the shares.
func TestEvenOutWaitsForReservations(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{})
	var a minimal.Assignment
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		a, _, _ = p.Join(a, id)
	}
	if p.Settled(a) {
		t.Fatalf("unequal shares reported settled:\n%v", a)
	}
	a, _, _ = p.Leave(a, "w3", time.Unix(0, 0))
	if b, moves := p.EvenOut(a); len(moves) > 0 || b.String() != a.String() {
		t.Fatalf("EvenOut with a reservation pending moved %v", moves)
	}
	if p.Settled(a) {
		t.Fatal("a ring with a reservation pending reported settled")
	}
	a, _ = p.Expire(a, time.Unix(0, 0).Add(p.Config().ReturnDelay))
	if _, moves := p.EvenOut(a); len(moves) == 0 {
		t.Fatalf("EvenOut after the expiry moved nothing on\n%v", a)
	}
}

// TestHandOnIsExpireForOneMember: HandOn gives exactly what Expire gives when that member alone is
// due, refuses a member that did not leave, and keeps a reservation no active member can take.
func TestHandOnIsExpireForOneMember(t *testing.T) {
	p, _ := minimal.NewPlanner(minimal.Config{})
	a := settled(t, p, 4)
	now := time.Unix(100, 0)
	left, _, _ := p.Leave(a, a.Members[1].ID, now)
	viaExpire, movesExpire := p.Expire(left, now.Add(p.Config().ReturnDelay))
	viaHandOn, movesHandOn, err := p.HandOn(left, a.Members[1].ID)
	if err != nil || viaHandOn.String() != viaExpire.String() || fmt.Sprint(movesHandOn) != fmt.Sprint(movesExpire) {
		t.Fatalf("HandOn (%v):\n%v%v\nExpire:\n%v%v", err, viaHandOn, movesHandOn, viaExpire, movesExpire)
	}
	if _, _, err := p.HandOn(a, a.Members[0].ID); !errors.Is(err, minimal.ErrNotReserved) || err.Error() != `minimal: not a member that left: hand-on of "`+a.Members[0].ID+`"` {
		t.Fatalf("hand-on of an active member: %v", err)
	}
	alone, _, _ := p.Join(minimal.Assignment{}, "w")
	alone, _, _ = p.Leave(alone, "w", now)
	kept, moves, err := p.HandOn(alone, "w")
	if err != nil || len(moves) != 0 || kept.String() != alone.String() {
		t.Fatalf("hand-on with nobody to take it: %v %v\n%v", err, moves, kept)
	}
}
