package lease

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// MinToken and MaxToken bound the Murmur3 token ring that Cassandra's Murmur3Partitioner uses.
const (
	MinToken int64 = math.MinInt64
	MaxToken int64 = math.MaxInt64
)

// Range is a contiguous, inclusive run of tokens [Start, End] with Start <= End.
type Range struct {
	Start int64
	End   int64
}

// FullRing is the whole token space.
var FullRing = Range{Start: MinToken, End: MaxToken}

// Contains reports whether token t lies in r.
func (r Range) Contains(t int64) bool { return r.Start <= t && t <= r.End }

// Width is the number of tokens in r minus one. It is returned as End-Start so that the full ring,
// which holds 2^64 tokens, still fits in a uint64.
func (r Range) Width() uint64 { return uint64(r.End) - uint64(r.Start) }

func (r Range) String() string { return fmt.Sprintf("[%d,%d]", r.Start, r.End) }

// Split divides the whole ring into n contiguous ranges in token order whose sizes differ by at most
// one token, with no gap and no overlap. The first 2^64 mod n ranges are the larger ones. Range 0
// starts at MinToken; it is the range of Node-0 when the ring is settled. n must be at least 1.
func Split(n int) []Range {
	if n < 1 {
		panic("lease.Split: n < 1")
	}
	if n == 1 {
		return []Range{FullRing}
	}
	// 2^64 = q*n + rem, computed without overflow from MaxUint64 = 2^64 - 1.
	q := math.MaxUint64 / uint64(n)
	rem := math.MaxUint64%uint64(n) + 1
	if rem == uint64(n) {
		q, rem = q+1, 0
	}
	out := make([]Range, n)
	offset := uint64(0) // distance from MinToken
	for i := range out {
		size := q
		if uint64(i) < rem {
			size++
		}
		out[i] = Range{Start: offsetToken(offset), End: offsetToken(offset + size - 1)}
		offset += size
	}
	return out
}

func offsetToken(off uint64) int64 { return int64(off) + MinToken }

// Ranges is a set of tokens kept as sorted, disjoint, non-adjacent ranges (normalized). The zero
// value is the empty set. Functions in this package always return normalized Ranges.
type Ranges []Range

// Normalize sorts rs and merges overlapping and adjacent ranges.
func Normalize(rs []Range) Ranges {
	if len(rs) == 0 {
		return nil
	}
	sorted := make([]Range, len(rs))
	copy(sorted, rs)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	out := Ranges{sorted[0]}
	for _, r := range sorted[1:] {
		last := &out[len(out)-1]
		if last.End == MaxToken || r.Start <= last.End+1 {
			if r.End > last.End {
				last.End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// Contains reports whether token t is in the set.
func (rs Ranges) Contains(t int64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].End >= t })
	return i < len(rs) && rs[i].Start <= t
}

// Empty reports whether the set holds no token.
func (rs Ranges) Empty() bool { return len(rs) == 0 }

// Fraction is the share of the token ring the ranges cover, from 0 to 1 (for people: a float64
// cannot tell one token from none at this scale).
func (rs Ranges) Fraction() float64 {
	total := 0.0
	for _, r := range rs {
		total += float64(r.Width()) + 1
	}
	return total / math.Pow(2, 64)
}

// Equal reports whether two normalized sets hold the same tokens.
func (rs Ranges) Equal(other Ranges) bool {
	if len(rs) != len(other) {
		return false
	}
	for i := range rs {
		if rs[i] != other[i] {
			return false
		}
	}
	return true
}

// Union returns the tokens in either set.
func (rs Ranges) Union(other Ranges) Ranges {
	all := make([]Range, 0, len(rs)+len(other))
	all = append(all, rs...)
	all = append(all, other...)
	return Normalize(all)
}

// Intersect returns the tokens in both sets.
func (rs Ranges) Intersect(other Ranges) Ranges {
	var out []Range
	i, j := 0, 0
	for i < len(rs) && j < len(other) {
		lo := max(rs[i].Start, other[j].Start)
		hi := min(rs[i].End, other[j].End)
		if lo <= hi {
			out = append(out, Range{Start: lo, End: hi})
		}
		if rs[i].End < other[j].End {
			i++
		} else {
			j++
		}
	}
	return Normalize(out)
}

// Subtract returns the tokens of rs that are not in other.
func (rs Ranges) Subtract(other Ranges) Ranges {
	var out []Range
	j := 0
	for _, r := range rs {
		cur := r
		open := true
		for j < len(other) && other[j].End < cur.Start {
			j++
		}
		for k := j; k < len(other) && other[k].Start <= cur.End; k++ {
			o := other[k]
			if o.Start > cur.Start {
				out = append(out, Range{Start: cur.Start, End: o.Start - 1})
			}
			if o.End >= cur.End {
				open = false
				break
			}
			cur.Start = o.End + 1
		}
		if open {
			out = append(out, cur)
		}
	}
	return Normalize(out)
}

// Overlaps reports whether the two sets share a token.
func (rs Ranges) Overlaps(other Ranges) bool { return !rs.Intersect(other).Empty() }

func (rs Ranges) String() string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return "{" + strings.Join(parts, " ") + "}"
}
