package minimal

import (
	"sort"

	"github.com/retryring/retryring/lease"
)

// EvenOut is one step of the work an idle ring does: it brings every member's share to its
// target (⌊2^64/N⌋ or one token more) and merges away the smallest ranges of any member holding
// more than MergeAbove, under a budget of StepMoves moves. It does nothing while a member is
// reserved (a return or an expiry is pending: the ring is not idle) and returns no move once the
// ring is Settled, so a caller runs it until then, a step per interval.
//
// Shares move only by shifting the boundary between two ranges of different members that touch
// (a push along a path of members, each giving the next a piece next to that member's range), so
// it never adds a range to anyone. A merge hands a member's smallest range whole to the member
// whose range touches it, then pushes repair the balance.
func (p *Planner) EvenOut(a Assignment) (Assignment, []Move) {
	active := a.active()
	if len(active) != len(a.Members) || len(active) < 2 {
		return a, nil
	}
	out := a.clone()
	var moves []Move
	for len(moves) < p.cfg.StepMoves {
		t := targets(out, active)
		if giver, ok := mostOver(out, t); ok {
			path, pieces := pushPath(out, giver, t)
			if len(moves) > 0 && len(moves)+len(pieces) > p.cfg.StepMoves {
				break
			}
			for k, piece := range pieces {
				moves = append(moves, out.move(path[k], path[k+1], piece))
			}
			continue
		}
		m, ok := p.mostFragmented(out)
		if !ok {
			break
		}
		r, x := smallestWithNeighbour(out, m)
		moves = append(moves, out.move(m, x, r))
	}
	return out, moves
}

// Settled reports whether the ring is idle and even: no reservation, every share at its target,
// no member above MergeAbove ranges. EvenOut returns no move exactly then.
func (p *Planner) Settled(a Assignment) bool {
	active := a.active()
	if len(active) != len(a.Members) {
		return false
	}
	if len(active) < 2 {
		return true
	}
	if _, over := mostOver(a, targets(a, active)); over {
		return false
	}
	_, fragmented := p.mostFragmented(a)
	return !fragmented
}

// mostOver is the member furthest above its target, and false when every member is at its
// target (the targets sum to the ring, so nobody is under either).
func mostOver(a Assignment, t map[int]uint64) (int, bool) {
	best, excess := -1, uint64(0)
	for i := range a.Members {
		if s := share(a.Members[i].Ranges); s > t[i] && s-t[i] > excess {
			best, excess = i, s-t[i]
		}
	}
	return best, best >= 0
}

// mostFragmented is the member with the most ranges above MergeAbove (ties: the lower index).
func (p *Planner) mostFragmented(a Assignment) (int, bool) {
	best := -1
	for i, m := range a.Members {
		if len(m.Ranges) > p.cfg.MergeAbove && (best < 0 || len(m.Ranges) > len(a.Members[best].Ranges)) {
			best = i
		}
	}
	return best, best >= 0
}

// segment is a maximal run of tokens of one member: consecutive segments always belong to
// different members, because a member's ranges are normalized.
type segment struct {
	r     lease.Range
	owner int
}

func segments(a Assignment) []segment {
	var out []segment
	for i, m := range a.Members {
		for _, r := range m.Ranges {
			out = append(out, segment{r, i})
		}
	}
	sort.Slice(out, func(x, y int) bool { return out[x].r.Start < out[y].r.Start })
	return out
}

// smallestWithNeighbour is member m's smallest range and the member it goes to on a merge: the
// less loaded of the members whose ranges touch it (one always does: m has at least two ranges).
func smallestWithNeighbour(a Assignment, m int) (lease.Range, int) {
	segs := segments(a)
	best, to := -1, -1
	for j, s := range segs {
		if s.owner != m || (best >= 0 && size(s.r) >= size(segs[best].r)) {
			continue
		}
		n := -1
		for _, k := range []int{j - 1, j + 1} {
			if k >= 0 && k < len(segs) && (n < 0 || share(a.Members[segs[k].owner].Ranges) < share(a.Members[n].Ranges)) {
				n = segs[k].owner
			}
		}
		best, to = j, n
	}
	return segs[best].r, to
}

// edge is a boundary across which member u can give member v tokens: the end of u's segment
// seg that touches v's segment next (seg+1 when high, else seg-1).
type edge struct {
	seg  int
	high bool // u gives the high end of seg, else its low end
}

// receiving is the segment of v that an edge's piece joins.
func (e edge) receiving() int {
	if e.high {
		return e.seg + 1
	}
	return e.seg - 1
}

// pushPath finds the member under its target nearest to giver in the graph whose edges are
// touching segments, and the pieces each member on the path gives the next, in order: δ tokens
// each, δ being the least of the giver's excess and the receiver's deficit. A member on the way
// that receives and gives through the same segment just slides it by δ (what it gives may be
// what it just received); one that gives from another segment gives at most that segment, which
// caps δ, and the giver gives at most the segment it gives from. So every push either brings a
// member to its target or empties a segment, and none adds one: EvenOut terminates.
//
// The graph is connected, since the segments in token order visit every member that holds a
// range, so the receiver is found unless it holds no range at all (see lonePiece).
func pushPath(a Assignment, giver int, t map[int]uint64) ([]int, []lease.Range) {
	segs := segments(a)
	edges := map[[2]int][]edge{}
	for j := 0; j+1 < len(segs); j++ {
		u, v := segs[j].owner, segs[j+1].owner
		edges[[2]int{u, v}] = append(edges[[2]int{u, v}], edge{seg: j, high: true})
		edges[[2]int{v, u}] = append(edges[[2]int{v, u}], edge{seg: j + 1, high: false})
	}
	neighbours := map[int][]int{}
	for uv := range edges {
		neighbours[uv[0]] = append(neighbours[uv[0]], uv[1])
	}
	parent := map[int]int{giver: -1}
	queue := []int{giver}
	recv := -1
	for len(queue) > 0 && recv < 0 {
		u := queue[0]
		queue = queue[1:]
		vs := neighbours[u]
		sort.Ints(vs)
		for _, v := range vs {
			if _, seen := parent[v]; seen {
				continue
			}
			parent[v] = u
			if share(a.Members[v].Ranges) < t[v] {
				recv = v
				break
			}
			queue = append(queue, v)
		}
	}
	if recv < 0 {
		return lonePiece(a, giver, t)
	}
	var path []int
	for v := recv; v >= 0; v = parent[v] {
		path = append([]int{v}, path...)
	}
	delta := min(share(a.Members[giver].Ranges)-t[giver], t[recv]-share(a.Members[recv].Ranges))
	chosen := make([]edge, len(path)-1)
	for k := range chosen {
		cands := edges[[2]int{path[k], path[k+1]}]
		best, sliding := cands[0], false
		for _, e := range cands {
			if k > 0 && e.seg == chosen[k-1].receiving() {
				best, sliding = e, true
				break
			}
			if size(segs[e.seg].r) > size(segs[best.seg].r) {
				best = e
			}
		}
		chosen[k] = best
		if !sliding {
			delta = min(delta, size(segs[best.seg].r))
		}
	}
	pieces := make([]lease.Range, len(chosen))
	for k, e := range chosen {
		r := segs[e.seg].r
		if e.high {
			pieces[k] = lease.Range{Start: int64(uint64(r.End) - delta + 1), End: r.End}
		} else {
			pieces[k] = lease.Range{Start: r.Start, End: int64(uint64(r.Start) + delta - 1)}
		}
	}
	return path, pieces
}

// lonePiece gives the first member that holds no range (and is thus under its target) what it
// lacks, cut from the giver's largest range.
func lonePiece(a Assignment, giver int, t map[int]uint64) ([]int, []lease.Range) {
	recv := -1
	for i, m := range a.Members {
		if len(m.Ranges) == 0 {
			recv = i
			break
		}
	}
	largest := a.Members[giver].Ranges[0]
	for _, r := range a.Members[giver].Ranges {
		if size(r) > size(largest) {
			largest = r
		}
	}
	delta := min(share(a.Members[giver].Ranges)-t[giver], t[recv], size(largest))
	piece := largest
	if size(largest) > delta {
		piece = cut(largest, delta, false)
	}
	return []int{giver, recv}, []lease.Range{piece}
}
