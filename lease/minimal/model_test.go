package minimal_test

import (
	"math/big"
	"sort"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// The naive model of an assignment: the ring cut at every range start of every assignment
// compared, each piece (atom) owned by whichever members contain its first token, found by
// scanning all of them. Every owner is constant on an atom, because no range starts inside one.
// Sizes are big integers, so that nothing overflows; nothing here reuses the package's arithmetic.

type atom struct {
	start int64
	size  *big.Int
}

func atomsOf(as ...minimal.Assignment) []atom {
	starts := map[int64]bool{lease.MinToken: true}
	for _, a := range as {
		for _, m := range a.Members {
			for _, r := range m.Ranges {
				starts[r.Start] = true
				if r.End != lease.MaxToken {
					starts[r.End+1] = true
				}
			}
		}
	}
	points := make([]int64, 0, len(starts))
	for p := range starts {
		points = append(points, p)
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	out := make([]atom, len(points))
	for i, p := range points {
		end := new(big.Int).Add(big.NewInt(lease.MaxToken), big.NewInt(1))
		if i+1 < len(points) {
			end.SetInt64(points[i+1])
		}
		out[i] = atom{start: p, size: end.Sub(end, big.NewInt(p))}
	}
	return out
}

// owners lists the ids of the members that hold token t, by scanning every range.
func owners(a minimal.Assignment, t int64) []string {
	var out []string
	for _, m := range a.Members {
		for _, r := range m.Ranges {
			if r.Start <= t && t <= r.End {
				out = append(out, m.ID)
			}
		}
	}
	return out
}

// shares is each member's number of tokens, counted atom by atom.
func shares(a minimal.Assignment) map[string]*big.Int {
	out := map[string]*big.Int{}
	for _, m := range a.Members {
		out[m.ID] = new(big.Int)
	}
	for _, at := range atomsOf(a) {
		for _, id := range owners(a, at.start) {
			out[id].Add(out[id], at.size)
		}
	}
	return out
}

// moved is the number of tokens whose owner differs between before and after.
func moved(before, after minimal.Assignment) *big.Int {
	total := new(big.Int)
	for _, at := range atomsOf(before, after) {
		b, c := owners(before, at.start), owners(after, at.start)
		if len(b) != 1 || len(c) != 1 || b[0] != c[0] {
			total.Add(total, at.size)
		}
	}
	return total
}

var ring = new(big.Int).Lsh(big.NewInt(1), 64)

// ratio is x/2^64 as a big.Rat.
func ratio(x *big.Int) *big.Rat { return new(big.Rat).SetFrac(x, ring) }
