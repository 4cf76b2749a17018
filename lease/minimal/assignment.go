package minimal

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/lease"
)

// Member is one worker id of the ring and the ranges it owns.
type Member struct {
	ID     string
	Ranges lease.Ranges
	// LeftAt is when the member left, zero while it is active. A member that left keeps its node
	// index and its ranges, reserved for a new incarnation of its id, until Expire hands them on.
	LeftAt time.Time
}

// Active reports whether the member has not left.
func (m Member) Active() bool { return m.LeftAt.IsZero() }

// Assignment is a ring's members in node-index order: Members[i] has node index i, so the indexes
// are dense by construction, and Members[0] is Node-0. Its methods never modify it: a Planner
// returns a new Assignment.
type Assignment struct {
	Members []Member
}

// Move is one range handed from one member to another: for the product, one handover (a new epoch
// without it for From, a release, a new epoch with it for To) and one re-scan of its instances.
type Move struct {
	From, To string
	Range    lease.Range
}

func (m Move) String() string { return fmt.Sprintf("%s->%s %v", m.From, m.To, m.Range) }

// Index is the node index of id, or -1.
func (a Assignment) Index(id string) int {
	for i, m := range a.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// Owners is every member's ranges by id.
func (a Assignment) Owners() map[string]lease.Ranges {
	out := make(map[string]lease.Ranges, len(a.Members))
	for _, m := range a.Members {
		out[m.ID] = m.Ranges
	}
	return out
}

func (a Assignment) String() string {
	var b strings.Builder
	for i, m := range a.Members {
		state := ""
		if !m.Active() {
			state = " (left)"
		}
		fmt.Fprintf(&b, "%d %s%s %.4f %v\n", i, m.ID, state, m.Ranges.Fraction(), m.Ranges)
	}
	return b.String()
}

func (a Assignment) clone() Assignment {
	out := Assignment{Members: make([]Member, len(a.Members))}
	for i, m := range a.Members {
		out.Members[i] = Member{ID: m.ID, Ranges: append(lease.Ranges(nil), m.Ranges...), LeftAt: m.LeftAt}
	}
	return out
}

// move hands piece from member i to member j. piece must be owned by i.
func (a *Assignment) move(i, j int, piece lease.Range) Move {
	one := lease.Ranges{piece}
	a.Members[i].Ranges = a.Members[i].Ranges.Subtract(one)
	a.Members[j].Ranges = a.Members[j].Ranges.Union(one)
	return Move{From: a.Members[i].ID, To: a.Members[j].ID, Range: piece}
}

// size is the number of tokens of one range. The full ring holds 2^64, one more than a uint64
// counts; it is only ever owned by a lone member, which every caller handles before counting.
func size(r lease.Range) uint64 {
	if r == lease.FullRing {
		return math.MaxUint64
	}
	return r.Width() + 1
}

// share is the number of tokens of a set (saturating at 2^64-1, see size).
func share(rs lease.Ranges) uint64 {
	var total uint64
	for _, r := range rs {
		s := size(r)
		if total > math.MaxUint64-s {
			return math.MaxUint64
		}
		total += s
	}
	return total
}

// bounds are the shares a member may hold among n members right after a change, in tokens:
// lo = ⌊(1−τ)·2^64/n⌋ and hi = ⌈(1+τ)·2^64/n⌉, and the mean ⌊2^64/n⌋. n must be at least 2, so
// that hi < 2^64 with τ ≤ 0.5.
type bounds struct{ lo, mean, hi uint64 }

var ringSize = new(big.Int).Lsh(big.NewInt(1), 64)

func boundsOf(n int, tolerance float64) bounds {
	tau := new(big.Rat).SetFloat64(tolerance)
	scaled := func(factor *big.Rat, up bool) uint64 {
		v := new(big.Rat).Mul(factor, new(big.Rat).SetFrac(ringSize, big.NewInt(int64(n))))
		q, r := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
		if up && r.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		return q.Uint64()
	}
	one := big.NewRat(1, 1)
	return bounds{
		lo:   scaled(new(big.Rat).Sub(one, tau), false),
		mean: scaled(one, false),
		hi:   scaled(new(big.Rat).Add(one, tau), true),
	}
}

// targets are the even-out step's shares among the n active members: ⌊2^64/n⌋ each, plus one
// token for the 2^64 mod n members that hold the most now (ties: the lower index), which is the
// target closest to the current shares, so a step never moves a token it need not.
func targets(a Assignment, active []int) map[int]uint64 {
	n := uint64(len(active))
	q := math.MaxUint64 / n
	rem := math.MaxUint64%n + 1
	if rem == n {
		q, rem = q+1, 0
	}
	order := append([]int(nil), active...)
	sort.SliceStable(order, func(x, y int) bool {
		return share(a.Members[order[x]].Ranges) > share(a.Members[order[y]].Ranges)
	})
	out := make(map[int]uint64, n)
	for k, i := range order {
		out[i] = q
		if uint64(k) < rem {
			out[i]++
		}
	}
	return out
}

// active lists the indexes of the active members.
func (a Assignment) active() []int {
	var out []int
	for i, m := range a.Members {
		if m.Active() {
			out = append(out, i)
		}
	}
	return out
}

// adjacent reports whether piece touches one of rs's ranges (so that giving it to their owner
// adds no range), and on which side of piece: below (the range ends right before piece.Start) or
// above (it starts right after piece.End).
func adjacent(rs lease.Ranges, piece lease.Range) (below, above bool) {
	for _, r := range rs {
		if piece.Start != lease.MinToken && r.End == piece.Start-1 {
			below = true
		}
		if piece.End != lease.MaxToken && r.Start == piece.End+1 {
			above = true
		}
	}
	return below, above
}

// cut takes n tokens off r (0 < n < size(r)), from its low end when low is set, else from its
// high end, and returns the piece taken.
func cut(r lease.Range, n uint64, low bool) lease.Range {
	if low {
		return lease.Range{Start: r.Start, End: int64(uint64(r.Start) + n - 1)}
	}
	return lease.Range{Start: int64(uint64(r.End) - n + 1), End: r.End}
}
