package lease_test

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
)

// The naive model of a token set. Generated ranges take their bounds from endpoints: a few tokens
// at both ends of the ring and around zero, each with its neighbours. Every bound that a set
// operation can produce is then an endpoint or an endpoint ±1, so it lies in points below, and
// membership is constant on each open gap between consecutive points. A set is therefore exactly a
// []bool over atoms (each point, and each non-empty gap between points), and the model's operations
// are bitwise.
var (
	base = []int64{
		lease.MinToken, lease.MinToken + 1, lease.MinToken + 2, lease.MinToken + 1000,
		-1000, -2, -1, 0, 1, 2, 1000,
		lease.MaxToken - 1000, lease.MaxToken - 2, lease.MaxToken - 1, lease.MaxToken,
	}
	endpoints = withNeighbours(base)
	points    = withNeighbours(endpoints)
	atoms     = makeAtoms(points)
)

// atom is a run of tokens [lo, hi] on which every set the model deals with is constant.
type atom struct{ lo, hi int64 }

func withNeighbours(ts []int64) []int64 {
	var out []int64
	for _, t := range ts {
		out = append(out, t)
		if t > lease.MinToken {
			out = append(out, t-1)
		}
		if t < lease.MaxToken {
			out = append(out, t+1)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func makeAtoms(ps []int64) []atom {
	if ps[0] != lease.MinToken || ps[len(ps)-1] != lease.MaxToken {
		panic("model points must include both ends of the ring")
	}
	var out []atom
	for i, p := range ps {
		out = append(out, atom{p, p})
		if i+1 < len(ps) && ps[i+1] > p+1 {
			out = append(out, atom{p + 1, ps[i+1] - 1})
		}
	}
	return out
}

type modelSet []bool

func modelOf(rs []lease.Range) modelSet {
	m := make(modelSet, len(atoms))
	for _, r := range rs {
		for i, a := range atoms {
			// Bounds are points, so a range covers an atom wholly or not at all.
			if r.Start <= a.lo && a.hi <= r.End {
				m[i] = true
			}
		}
	}
	return m
}

// ranges is the model's canonical form: maximal runs of atoms in the set.
func (m modelSet) ranges() lease.Ranges {
	var out lease.Ranges
	for i, in := range m {
		if !in {
			continue
		}
		if i > 0 && m[i-1] {
			out[len(out)-1].End = atoms[i].hi
		} else {
			out = append(out, lease.Range{Start: atoms[i].lo, End: atoms[i].hi})
		}
	}
	return out
}

func (m modelSet) contains(t int64) bool {
	for i, a := range atoms {
		if a.lo <= t && t <= a.hi {
			return m[i]
		}
	}
	panic("token outside every atom")
}

func (m modelSet) combine(o modelSet, f func(a, b bool) bool) modelSet {
	out := make(modelSet, len(m))
	for i := range m {
		out[i] = f(m[i], o[i])
	}
	return out
}

// probes are the tokens Contains is asked about: every atom's ends and a token inside each gap.
var probes = func() []int64 {
	var out []int64
	for _, a := range atoms {
		out = append(out, a.lo, a.hi, a.lo+(a.hi-a.lo)/2)
	}
	slices.Sort(out)
	return slices.Compact(out)
}()

var genRange = rapid.Custom(func(t *rapid.T) lease.Range {
	a := rapid.SampledFrom(endpoints).Draw(t, "a")
	b := rapid.SampledFrom(endpoints).Draw(t, "b")
	return lease.Range{Start: min(a, b), End: max(a, b)}
})

// genRawRanges draws an arbitrary list: unsorted, overlapping, adjacent, duplicated.
var genRawRanges = rapid.SliceOfN(genRange, 0, 8)

var genSet = rapid.Map(genRawRanges, func(rs []lease.Range) lease.Ranges { return lease.Normalize(rs) })

// checkNormalized fails unless rs is sorted, disjoint, non-adjacent and well-formed.
func checkNormalized(t *rapid.T, what string, rs lease.Ranges) {
	t.Helper()
	for i, r := range rs {
		if r.Start > r.End {
			t.Fatalf("%s = %v: range %d has start > end", what, rs, i)
		}
		// End+1 is only computed once End is known not to be MaxToken.
		if i > 0 && (rs[i-1].End == lease.MaxToken || r.Start <= rs[i-1].End || r.Start == rs[i-1].End+1) {
			t.Fatalf("%s = %v: ranges %d and %d overlap, touch or are out of order", what, rs, i-1, i)
		}
	}
}

func checkAgainstModel(t *rapid.T, what string, got lease.Ranges, want modelSet) {
	t.Helper()
	checkNormalized(t, what, got)
	if w := want.ranges(); !slices.Equal(got, w) {
		t.Fatalf("%s = %v, model says %v", what, got, w)
	}
	for _, p := range probes {
		if got.Contains(p) != want.contains(p) {
			t.Fatalf("%s = %v: Contains(%d) = %v, model says %v", what, got, p, got.Contains(p), want.contains(p))
		}
	}
}

func TestNormalizeMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw := genRawRanges.Draw(t, "raw")
		in := slices.Clone(raw)
		got := lease.Normalize(raw)
		if !slices.Equal(raw, in) {
			t.Fatalf("Normalize changed its argument: %v became %v", in, raw)
		}
		checkAgainstModel(t, "Normalize", got, modelOf(raw))
		if again := lease.Normalize(got); !slices.Equal(again, got) {
			t.Fatalf("Normalize is not idempotent: %v then %v", got, again)
		}
		shuffled := rapid.Permutation(raw).Draw(t, "shuffled")
		if other := lease.Normalize(shuffled); !other.Equal(got) {
			t.Fatalf("Normalize depends on order: %v vs %v", got, other)
		}
	})
}

func TestSetOperationsMatchModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genSet.Draw(t, "a")
		b := genSet.Draw(t, "b")
		ma, mb := modelOf(a), modelOf(b)
		aBefore, bBefore := slices.Clone(a), slices.Clone(b)

		checkAgainstModel(t, "Union", a.Union(b), ma.combine(mb, func(x, y bool) bool { return x || y }))
		checkAgainstModel(t, "Intersect", a.Intersect(b), ma.combine(mb, func(x, y bool) bool { return x && y }))
		checkAgainstModel(t, "Subtract", a.Subtract(b), ma.combine(mb, func(x, y bool) bool { return x && !y }))

		overlap := false
		for i := range ma {
			overlap = overlap || (ma[i] && mb[i])
		}
		if a.Overlaps(b) != overlap || b.Overlaps(a) != overlap {
			t.Fatalf("%v.Overlaps(%v) = %v, model says %v", a, b, a.Overlaps(b), overlap)
		}
		if eq := slices.Equal(ma, mb); a.Equal(b) != eq || b.Equal(a) != eq {
			t.Fatalf("%v.Equal(%v) = %v, model says %v", a, b, a.Equal(b), eq)
		}
		if a.Empty() != !slices.Contains(ma, true) {
			t.Fatalf("%v.Empty() = %v", a, a.Empty())
		}
		if !slices.Equal(a, aBefore) || !slices.Equal(b, bBefore) {
			t.Fatalf("operations changed their operands: %v %v became %v %v", aBefore, bBefore, a, b)
		}
	})
}

// The identities the coordinator leans on when it moves ranges between workers.
func TestSetAlgebra(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genSet.Draw(t, "a")
		b := genSet.Draw(t, "b")
		c := genSet.Draw(t, "c")
		full := lease.Ranges{lease.FullRing}
		identities := []struct {
			name        string
			left, right lease.Ranges
		}{
			{"a∖b ∪ a∩b = a", a.Subtract(b).Union(a.Intersect(b)), a},
			{"a∪b = b∪a", a.Union(b), b.Union(a)},
			{"a∩b = b∩a", a.Intersect(b), b.Intersect(a)},
			{"(a∪b)∪c = a∪(b∪c)", a.Union(b).Union(c), a.Union(b.Union(c))},
			{"a∖(b∪c) = (a∖b)∖c", a.Subtract(b.Union(c)), a.Subtract(b).Subtract(c)},
			{"a∩(b∪c) = a∩b ∪ a∩c", a.Intersect(b.Union(c)), a.Intersect(b).Union(a.Intersect(c))},
			{"complement twice", full.Subtract(full.Subtract(a)), a},
			{"a ∪ complement = ring", a.Union(full.Subtract(a)), full},
			{"a∖a = ∅", a.Subtract(a), nil},
			{"a∖∅ = a", a.Subtract(nil), a},
			{"∅∖a = ∅", lease.Ranges(nil).Subtract(a), nil},
			{"a∩∅ = ∅", a.Intersect(nil), nil},
			{"a∪∅ = a", a.Union(nil), a},
		}
		for _, id := range identities {
			if !id.left.Equal(id.right) {
				t.Fatalf("%s fails: %v vs %v", id.name, id.left, id.right)
			}
		}
		if a.Subtract(b).Overlaps(b) {
			t.Fatalf("a∖b overlaps b: %v ∖ %v", a, b)
		}
	})
}

// Cases at the ends of the ring, where End+1 and Start-1 would overflow.
func TestRangesAtRingEnds(t *testing.T) {
	const lo, hi = lease.MinToken, lease.MaxToken
	r := func(s, e int64) lease.Range { return lease.Range{Start: s, End: e} }
	set := func(rs ...lease.Range) lease.Ranges { return lease.Ranges(rs) }
	full := set(lease.FullRing)
	cases := []struct {
		name      string
		got, want lease.Ranges
	}{
		{"merge two ranges ending at MaxToken", lease.Normalize([]lease.Range{r(hi-1, hi), r(hi, hi)}), set(r(hi-1, hi))},
		{"merge after a range ending at MaxToken", lease.Normalize([]lease.Range{r(0, hi), r(5, 10), r(hi, hi)}), set(r(0, hi))},
		{"adjacent halves make the ring", lease.Normalize([]lease.Range{r(0, hi), r(lo, -1)}), full},
		{"single tokens at both ends stay apart", lease.Normalize([]lease.Range{r(hi, hi), r(lo, lo)}), set(r(lo, lo), r(hi, hi))},
		{"MinToken and MinToken+1 merge", lease.Normalize([]lease.Range{r(lo+1, lo+1), r(lo, lo)}), set(r(lo, lo+1))},
		{"ring minus MinToken", full.Subtract(set(r(lo, lo))), set(r(lo+1, hi))},
		{"ring minus MaxToken", full.Subtract(set(r(hi, hi))), set(r(lo, hi-1))},
		{"ring minus a range from MinToken", full.Subtract(set(r(lo, 0))), set(r(1, hi))},
		{"ring minus a range to MaxToken", full.Subtract(set(r(0, hi))), set(r(lo, -1))},
		{"ring minus both ends", full.Subtract(set(r(lo, lo), r(hi, hi))), set(r(lo+1, hi-1))},
		{"ring minus ring", full.Subtract(full), nil},
		{"ring minus a middle token", full.Subtract(set(r(0, 0))), set(r(lo, -1), r(1, hi))},
		{"union up to MaxToken", set(r(lo, lo)).Union(set(r(lo+1, hi))), full},
		{"intersect at MaxToken", set(r(0, hi)).Intersect(set(r(hi, hi))), set(r(hi, hi))},
		{"intersect at MinToken", set(r(lo, 0)).Intersect(set(r(lo, lo))), set(r(lo, lo))},
		{"intersect disjoint ends", set(r(lo, lo)).Intersect(set(r(hi, hi))), nil},
	}
	for _, c := range cases {
		if !c.got.Equal(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if !full.Contains(lo) || !full.Contains(hi) || set(r(lo+1, hi-1)).Contains(lo) || set(r(lo+1, hi-1)).Contains(hi) {
		t.Error("Contains is wrong at the ring's ends")
	}
	if lease.Ranges(nil).Contains(0) || !lease.Ranges(nil).Empty() {
		t.Error("the zero Ranges is not the empty set")
	}
	if !set(r(lo, lo)).Overlaps(full) || set(r(lo, lo)).Overlaps(set(r(lo+1, hi))) {
		t.Error("Overlaps is wrong at MinToken")
	}
	if lease.FullRing.Width() != ^uint64(0) || r(5, 5).Width() != 0 || r(lo, -1).Width() != 1<<63-1 {
		t.Error("Width is wrong")
	}
	if lease.Normalize(nil) != nil || lease.Normalize([]lease.Range{}) != nil {
		t.Error("Normalize of nothing is not the empty set")
	}
}
