package lease_test

import (
	"math/big"
	"testing"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
)

// splitModel is the slow, obviously right version of lease.Split: with 2^64 = q·n + rem, range i
// starts q·i + min(i, rem) tokens after MinToken, so the first rem ranges hold q+1 tokens and the
// rest q. It works in math/big so that nothing can overflow.
type splitModel struct {
	ringSize, minToken *big.Int
	n, q, rem          *big.Int
	// scratch values reused across calls: checking all n up to 2000 walks two million ranges.
	off, tmp *big.Int
}

func newSplitModel() *splitModel {
	return &splitModel{
		ringSize: new(big.Int).Lsh(big.NewInt(1), 64),
		minToken: big.NewInt(lease.MinToken),
		n:        new(big.Int), q: new(big.Int), rem: new(big.Int),
		off: new(big.Int), tmp: new(big.Int),
	}
}

func (m *splitModel) setN(n int) {
	m.n.SetInt64(int64(n))
	m.q.DivMod(m.ringSize, m.n, m.rem)
}

// start returns the model's first token of range i; start(n) is one past MaxToken.
func (m *splitModel) start(i int) *big.Int {
	m.off.SetInt64(int64(i))
	m.off.Mul(m.off, m.q)
	m.tmp.SetInt64(int64(i))
	if m.tmp.Cmp(m.rem) > 0 {
		m.tmp.Set(m.rem)
	}
	m.off.Add(m.off, m.tmp)
	return m.off.Add(m.off, m.minToken)
}

// checkSplit compares lease.Split(n) with the model and with the coverage rules of invariant 1.
func checkSplit(t interface {
	Helper()
	Fatalf(string, ...any)
}, m *splitModel, n int) {
	t.Helper()
	rs := lease.Split(n)
	if len(rs) != n {
		t.Fatalf("Split(%d): %d ranges", n, len(rs))
	}
	if rs[0].Start != lease.MinToken {
		t.Fatalf("Split(%d): first range starts at %d, want MinToken", n, rs[0].Start)
	}
	if rs[n-1].End != lease.MaxToken {
		t.Fatalf("Split(%d): last range ends at %d, want MaxToken", n, rs[n-1].End)
	}
	m.setN(n)
	q := m.q.Uint64() // fits: n >= 2 gives q < 2^63, and n == 1 is checked below
	rem := m.rem.Uint64()
	var minSize, maxSize uint64 = ^uint64(0), 0
	total := new(big.Int)
	for i, r := range rs {
		if r.Start > r.End {
			t.Fatalf("Split(%d)[%d] = %v: start > end", n, i, r)
		}
		if i > 0 && r.Start != rs[i-1].End+1 {
			t.Fatalf("Split(%d)[%d] = %v does not start right after %v", n, i, r, rs[i-1])
		}
		if m.start(i).Int64() != r.Start {
			t.Fatalf("Split(%d)[%d].Start = %d, model says %v", n, i, r.Start, m.start(i))
		}
		if n == 1 {
			continue // the only range holds 2^64 tokens, one more than a uint64 counts
		}
		size := r.Width() + 1
		want := q
		if uint64(i) < rem {
			want++
		}
		if size != want {
			t.Fatalf("Split(%d)[%d] holds %d tokens, want %d (q=%d rem=%d)", n, i, size, want, q, rem)
		}
		minSize, maxSize = min(minSize, size), max(maxSize, size)
		total.Add(total, m.tmp.SetUint64(size))
	}
	if n == 1 {
		if rs[0] != lease.FullRing {
			t.Fatalf("Split(1) = %v, want the full ring", rs)
		}
		return
	}
	if maxSize-minSize > 1 {
		t.Fatalf("Split(%d): sizes from %d to %d differ by more than one token", n, minSize, maxSize)
	}
	if total.Cmp(m.ringSize) != 0 {
		t.Fatalf("Split(%d): sizes sum to %v, want 2^64", n, total)
	}
	// The model's end of the last range is one before start(n): the whole ring, exactly.
	if end := new(big.Int).Sub(m.start(n), big.NewInt(1)); !end.IsInt64() || end.Int64() != lease.MaxToken {
		t.Fatalf("model for n=%d ends at %v", n, end)
	}
}

func TestSplitMatchesBigIntModelExhaustively(t *testing.T) {
	m := newSplitModel()
	for n := 1; n <= 2000; n++ {
		checkSplit(t, m, n)
	}
}

func TestSplitEdges(t *testing.T) {
	m := newSplitModel()
	for _, n := range []int{1, 2, 3, 7, 9999, 10000} {
		checkSplit(t, m, n)
	}
	// 2^64 mod n is 0 for powers of two: every range has the same size.
	for _, n := range []int{2, 4, 1024, 8192} {
		rs := lease.Split(n)
		for _, r := range rs {
			if r.Width() != rs[0].Width() {
				t.Fatalf("Split(%d): unequal sizes %v and %v", n, rs[0], r)
			}
		}
	}
	if got := lease.Split(2); got[0].End != -1 || got[1].Start != 0 {
		t.Fatalf("Split(2) = %v, want halves meeting at -1|0", got)
	}
	// 2^64 = 6148914691236517205·3 + 1: only range 0 (Node-0's) is one token larger.
	if got := lease.Split(3); got[0].Width() != got[1].Width()+1 || got[1].Width() != got[2].Width() {
		t.Fatalf("Split(3) = %v: want range 0 one token larger than the others", got)
	}
}

func TestSplitMatchesBigIntModelForLargeN(t *testing.T) {
	m := newSplitModel()
	rapid.Check(t, func(t *rapid.T) {
		checkSplit(t, m, rapid.IntRange(2001, 10000).Draw(t, "n"))
	})
}

func TestSplitCoversRingAsASet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(t, "n")
		rs := lease.Split(n)
		if got := lease.Normalize(rs); !got.Equal(lease.Ranges{lease.FullRing}) {
			t.Fatalf("Split(%d) normalizes to %v, want the full ring", n, got)
		}
		var seen lease.Ranges
		for i, r := range rs {
			one := lease.Ranges{r}
			if seen.Overlaps(one) {
				t.Fatalf("Split(%d)[%d] = %v overlaps an earlier range", n, i, r)
			}
			seen = seen.Union(one)
		}
	})
}

func TestSplitPanicsOnNonPositiveN(t *testing.T) {
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Split(%d) did not panic", n)
				}
			}()
			lease.Split(n)
		}()
	}
}
