package minimal

import (
	"fmt"
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// Planner computes minimal-movement assignments under one Config. It is pure: every method takes
// an Assignment (and the time, where time decides anything) and returns a new one with the moves
// that lead to it.
type Planner struct {
	cfg Config
}

// NewPlanner validates cfg and fills its defaults.
func NewPlanner(cfg Config) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Planner{cfg: cfg.WithDefaults()}, nil
}

// Config is the planner's configuration with its defaults filled in.
func (p *Planner) Config() Config { return p.cfg }

// Join adds worker id. A new id takes about 1/(N+1) of the ring from the most loaded members and
// gets the next node index; an id that left and is still reserved is a return: it gets its node
// index and its old ranges back, and nothing moves.
func (p *Planner) Join(a Assignment, id string) (Assignment, []Move, error) {
	if i := a.Index(id); i >= 0 {
		if a.Members[i].Active() {
			return a, nil, fmt.Errorf("%w: join of %q", ErrActiveMember, id)
		}
		out := a.clone()
		out.Members[i].LeftAt = time.Time{}
		return out, nil, nil
	}
	out := a.clone()
	if len(out.Members) == 0 {
		out.Members = []Member{{ID: id, Ranges: lease.Ranges{lease.FullRing}}}
		return out, nil, nil
	}
	out.Members = append(out.Members, Member{ID: id})
	me := len(out.Members) - 1
	active := out.active()
	if len(active) == 2 && out.Members[active[0]].Ranges.Equal(lease.Ranges{lease.FullRing}) {
		// A lone member owns 2^64 tokens, one more than share counts: halve it directly.
		half := lease.Split(2)[1]
		return out, []Move{out.move(active[0], me, half)}, nil
	}
	b := boundsOf(len(out.Members), p.cfg.Tolerance)
	var moves []Move
	donors := active[:len(active)-1]
	// First every donor above the upper bound comes down to it, whatever the newcomer needs, so
	// that no member stays above; then the newcomer takes what it still lacks of the mean from the
	// most loaded, each down to the lower bound at most, so that it needs few donors.
	for _, d := range byShareDesc(out, donors) {
		if s := share(out.Members[d].Ranges); s > b.hi {
			moves = append(moves, p.take(&out, d, me, s-b.hi)...)
		}
	}
	for _, d := range byShareDesc(out, donors) {
		got := share(out.Members[me].Ranges)
		if got >= b.mean {
			break
		}
		if s := share(out.Members[d].Ranges); s > b.lo {
			moves = append(moves, p.take(&out, d, me, min(b.mean-got, s-b.lo))...)
		}
	}
	return out, moves, nil
}

// take moves up to n tokens from member d to member me, a range at a time: first a range of d
// that touches one of me's ranges (the piece merges, me gains no range), else d's largest range;
// a whole range when it fits in n (d loses a range), else n tokens cut from its end that touches
// me, or from its high end. It stops early rather than give me more than MaxRanges ranges.
func (p *Planner) take(a *Assignment, d, me int, n uint64) []Move {
	var moves []Move
	for n > 0 && len(a.Members[d].Ranges) > 0 {
		mine := a.Members[me].Ranges
		pick, touching := -1, false
		for i, r := range a.Members[d].Ranges {
			below, above := adjacent(mine, r)
			if below || above {
				pick, touching = i, true
				break
			}
			if pick < 0 || size(r) > size(a.Members[d].Ranges[pick]) {
				pick = i
			}
		}
		if !touching && len(mine) >= p.cfg.MaxRanges {
			return moves
		}
		r := a.Members[d].Ranges[pick]
		piece := r
		if s := size(r); s > n {
			below, _ := adjacent(mine, r)
			piece = cut(r, n, below)
		}
		moves = append(moves, a.move(d, me, piece))
		n -= size(piece)
	}
	return moves
}

// byShareDesc orders member indexes by share, the largest first (ties: the lower index).
func byShareDesc(a Assignment, idx []int) []int {
	out := append([]int(nil), idx...)
	sort.SliceStable(out, func(x, y int) bool {
		return share(a.Members[out[x]].Ranges) > share(a.Members[out[y]].Ranges)
	})
	return out
}
