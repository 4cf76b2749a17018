package minimal

import (
	"fmt"
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// Leave marks worker id as left at now. Its ranges stay reserved for a new incarnation of the id
// until Expire hands them on, ReturnDelay later; with a negative ReturnDelay they are handed on at
// once (the moves are returned), unless no active member is left to take them (see Expire).
func (p *Planner) Leave(a Assignment, id string, now time.Time) (Assignment, []Move, error) {
	i := a.Index(id)
	if i < 0 || !a.Members[i].Active() {
		return a, nil, fmt.Errorf("%w: leave of %q", ErrNotMember, id)
	}
	out := a.clone()
	out.Members[i].LeftAt = now
	if p.cfg.ReturnDelay < 0 {
		out, moves := p.Expire(out, now)
		return out, moves, nil
	}
	return out, nil, nil
}

// Expire hands on the ranges of every member whose reservation ran out by now (LeftAt +
// ReturnDelay ≤ now), one member after another in node-index order, and drops those members. A
// reservation outlives its delay while no active member is left to take its ranges.
func (p *Planner) Expire(a Assignment, now time.Time) (Assignment, []Move) {
	out := a
	var moves []Move
	for {
		due := -1
		for i, m := range out.Members {
			if !m.Active() && !now.Before(m.LeftAt.Add(p.cfg.ReturnDelay)) {
				due = i
				break
			}
		}
		if due < 0 || len(out.active()) == 0 {
			return out, moves
		}
		var more []Move
		out, more = p.handOn(out.clone(), due)
		moves = append(moves, more...)
	}
}

// Due is when the next reservation runs out, and false when there is none.
func (p *Planner) Due(a Assignment) (time.Time, bool) {
	var next time.Time
	found := false
	for _, m := range a.Members {
		if !m.Active() {
			at := m.LeftAt.Add(p.cfg.ReturnDelay)
			if !found || at.Before(next) {
				next, found = at, true
			}
		}
	}
	return next, found
}

// handOn gives the ranges of member l (which left) to the active members and removes l: the
// member of the highest node index takes l's index, so one member at most changes index. Every
// piece goes to the least loaded active member that can take it (below the lower bound first,
// then one whose ranges it touches, then any), each filled up to the upper bound, so that few
// members receive a piece.
func (p *Planner) handOn(a Assignment, l int) (Assignment, []Move) {
	var moves []Move
	receivers := a.active()
	if len(receivers) == 1 && len(a.Members) == 2 {
		// The survivor is alone: it takes the whole ring, which share cannot count.
		for _, r := range a.Members[l].Ranges {
			moves = append(moves, a.move(l, receivers[0], r))
		}
	} else {
		b := boundsOf(len(a.Members)-1, p.cfg.Tolerance)
		for len(a.Members[l].Ranges) > 0 {
			piece := a.Members[l].Ranges[0]
			j := p.receiver(a, receivers, piece, b)
			room := b.hi - min(b.hi, share(a.Members[j].Ranges))
			// Filling j up to the upper bound must leave enough for every other member still
			// under the lower bound.
			if left, need := share(a.Members[l].Ranges), deficit(a, receivers, j, b.lo); left > need {
				room = min(room, left-need)
			}
			if s := size(piece); room > 0 && room < s {
				below, _ := adjacent(a.Members[j].Ranges, piece)
				piece = cut(piece, room, below)
			}
			moves = append(moves, a.move(l, j, piece))
		}
	}
	last := len(a.Members) - 1
	a.Members[l] = a.Members[last]
	a.Members = a.Members[:last]
	return a, moves
}

// deficit is what the members other than j lack of the lower bound lo.
func deficit(a Assignment, receivers []int, j int, lo uint64) uint64 {
	var total uint64
	for _, i := range receivers {
		if s := share(a.Members[i].Ranges); i != j && s < lo {
			total += lo - s
		}
	}
	return total
}

// receiver picks the active member that takes (a part of) piece.
func (p *Planner) receiver(a Assignment, receivers []int, piece lease.Range, b bounds) int {
	order := append([]int(nil), receivers...)
	sort.SliceStable(order, func(x, y int) bool {
		return share(a.Members[order[x]].Ranges) < share(a.Members[order[y]].Ranges)
	})
	touches := func(j int) bool {
		below, above := adjacent(a.Members[j].Ranges, piece)
		return below || above
	}
	fits := func(j int) bool { return touches(j) || len(a.Members[j].Ranges) < p.cfg.MaxRanges }
	under := func(j int, bound uint64) bool { return share(a.Members[j].Ranges) < bound }
	for _, pass := range []func(int) bool{
		func(j int) bool { return under(j, b.lo) && fits(j) },
		func(j int) bool { return under(j, b.hi) && touches(j) },
		func(j int) bool { return under(j, b.hi) && fits(j) },
		// Past this point a bound gives: coverage first, then the range bound, then balance.
		fits,
	} {
		for _, j := range order {
			if pass(j) {
				return j
			}
		}
	}
	return order[0]
}

// HandOn hands on the ranges of id, which left, now, whatever is left of its delay: the hand-on
// of Expire for one member. A caller that keeps the time of a leave itself (the FSM, which only
// knows the times its commands carry, hands on when the leader says the delay ran out) uses it
// instead of Expire. The reservation stays while no active member is left to take it.
func (p *Planner) HandOn(a Assignment, id string) (Assignment, []Move, error) {
	i := a.Index(id)
	if i < 0 || a.Members[i].Active() {
		return a, nil, fmt.Errorf("%w: hand-on of %q", ErrNotReserved, id)
	}
	if len(a.active()) == 0 {
		return a, nil, nil
	}
	out, moves := p.handOn(a.clone(), i)
	return out, moves, nil
}
