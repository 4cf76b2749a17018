package ringtest

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
)

var (
	half    = lease.Split(2)
	quarter = lease.Split(4)
	full    = lease.Ranges{lease.FullRing}
)

// iv builds an interval of worker (incarnation "1") over [from, to) seconds.
func iv(worker string, from, to float64, rs ...lease.Range) Interval {
	return Interval{
		Worker: worker, Incarnation: "1", From: secs(from), To: secs(to), Ranges: lease.Normalize(rs),
	}
}

func node0(i Interval) Interval { i.Node0 = true; return i }

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func kinds(vs []Violation) []ViolationKind {
	out := make([]ViolationKind, len(vs))
	for i, v := range vs {
		out[i] = v.Kind
	}
	return out
}

func TestCheckerAcceptsAHandover(t *testing.T) {
	// A holds the ring, shrinks to the first half at 10 s; B gets the second half at 12 s, after
	// A's element for it ended. A keeps renewing; A is Node-0 throughout.
	h := History{
		Intervals: []Interval{
			node0(iv("A", 0, 10, lease.FullRing)),
			node0(iv("A", 10, 30, half[0])),
			iv("B", 12, 30, half[1]),
		},
		Settled: []Window{{From: 0, To: secs(10)}, {From: secs(12), To: secs(30)}},
	}
	if vs := Check(h); len(vs) != 0 {
		t.Fatalf("a clean handover was refused:%s", FormatViolations(vs, 10))
	}
}

func TestCheckerCatchesAnOverlap(t *testing.T) {
	h := []Interval{
		iv("A", 0, 10, lease.FullRing),
		iv("B", 8, 20, half[1]), // A could still use the second half until 10 s
	}
	vs := CheckExclusive(h)
	if len(vs) != 1 {
		t.Fatalf("violations = %v, want one overlap", vs)
	}
	v := vs[0]
	if v.Kind != Overlap || v.At != secs(8) || !v.Ranges.Equal(lease.Ranges{half[1]}) {
		t.Fatalf("violation = %v, want an overlap of %v at 8s", v, half[1])
	}
	if v.Holders[0] != "A#1" || v.Holders[1] != "B#1" {
		t.Fatalf("holders = %v, want A#1 and B#1", v.Holders)
	}
}

func TestCheckerCatchesAnOverlapOfOneToken(t *testing.T) {
	edge := half[0].End
	h := []Interval{
		iv("A", 0, 10, half[0]),
		iv("B", 5, 10, lease.Range{Start: edge, End: lease.MaxToken}),
	}
	vs := CheckExclusive(h)
	if len(vs) != 1 || !vs[0].Ranges.Equal(lease.Ranges{{Start: edge, End: edge}}) {
		t.Fatalf("violations = %v, want the single token %d", vs, edge)
	}
}

func TestCheckerHalfOpenIntervalsDoNotMeet(t *testing.T) {
	h := []Interval{
		node0(iv("A", 0, 10, lease.FullRing)),
		node0(iv("B", 10, 20, lease.FullRing)),
	}
	if vs := Check(History{Intervals: h, Settled: []Window{{From: 0, To: secs(20)}}}); len(vs) != 0 {
		t.Fatalf("an element ending at t and one starting at t do not overlap:%s", FormatViolations(vs, 10))
	}
}

func TestCheckerIgnoresOneHoldersOwnElements(t *testing.T) {
	h := []Interval{
		node0(iv("A", 0, 10, lease.FullRing)),
		node0(iv("A", 5, 15, lease.FullRing)), // the recorder never makes these, but a holder never conflicts with itself
	}
	if vs := Check(History{Intervals: h}); len(vs) != 0 {
		t.Fatalf("violations = %v", vs)
	}
}

func TestCheckerCatchesTwoIncarnationsOfOneWorker(t *testing.T) {
	old := iv("A", 0, 10, lease.FullRing)
	young := iv("A", 4, 20, half[0])
	young.Incarnation = "2"
	vs := CheckExclusive([]Interval{old, young})
	if len(vs) != 1 || vs[0].Holders[0] != "A#1" || vs[0].Holders[1] != "A#2" {
		t.Fatalf("violations = %v, want A#1 against A#2", vs)
	}
}

func TestCheckerCatchesTwoIncarnationsHoldingDisjointRanges(t *testing.T) {
	old := iv("A", 0, 10, half[0])
	young := iv("A", 4, 20, half[1])
	young.Incarnation = "2"
	idle := iv("A", 0, 10) // an element with nothing in it holds nothing
	idle.Incarnation = "3"
	h := []Interval{old, young, idle}
	if vs := CheckExclusive(h); len(vs) != 0 {
		t.Fatalf("disjoint ranges overlap: %v", vs)
	}
	vs := CheckIncarnations(h)
	if len(vs) != 1 || vs[0].Kind != TwoIncarnations || vs[0].At != secs(4) || vs[0].Holders[1] != "A#2" {
		t.Fatalf("violations = %v, want A#1 and A#2 at 4s", vs)
	}
	other := iv("B", 4, 20, half[1])
	if vs := CheckIncarnations([]Interval{old, other}); len(vs) != 0 {
		t.Fatalf("two workers are not two incarnations: %v", vs)
	}
}

func TestCheckerCatchesTwoNode0s(t *testing.T) {
	h := []Interval{
		node0(iv("A", 0, 10, half[0])),
		node0(iv("B", 9, 20, half[1])), // disjoint ranges, but both Node-0 during [9, 10)
	}
	if vs := CheckExclusive(h); len(vs) != 0 {
		t.Fatalf("disjoint ranges reported as overlapping: %v", vs)
	}
	vs := CheckNode0(h)
	if len(vs) != 1 || vs[0].Kind != TwoNode0 || vs[0].At != secs(9) {
		t.Fatalf("violations = %v, want two Node-0s at 9s", vs)
	}
	if got := kinds(Check(History{Intervals: h})); len(got) != 1 || got[0] != TwoNode0 {
		t.Fatalf("Check kinds = %v", got)
	}
}

func TestCheckerCatchesAGapOnceSettled(t *testing.T) {
	h := []Interval{
		iv("A", 0, 10, half[0]),
		iv("B", 0, 10, half[1]),
		iv("A", 10, 20, half[0]),
		iv("B", 11, 20, half[1]), // B renewed late: its half was usable by nobody for 1 s
	}
	vs := CheckCoverage(h, []Window{{From: 0, To: secs(20)}})
	if len(vs) != 1 {
		t.Fatalf("violations = %v, want one gap", vs)
	}
	if v := vs[0]; v.Kind != Gap || v.At != secs(10) || !v.Ranges.Equal(lease.Ranges{half[1]}) {
		t.Fatalf("violation = %v, want %v missing at 10s", v, half[1])
	}
	// The same history outside any settled window is fine.
	if vs := CheckCoverage(h, []Window{{From: 0, To: secs(10)}, {From: secs(11), To: secs(20)}}); len(vs) != 0 {
		t.Fatalf("gap outside the windows reported: %v", vs)
	}
}

func TestCheckerReportsEachGapOnce(t *testing.T) {
	h := []Interval{
		iv("A", 0, 4, quarter[0]),
		iv("B", 0, 2, quarter[1]),
		iv("B", 3, 4, quarter[1]),
		iv("C", 0, 4, quarter[2], quarter[3]),
		iv("D", 1, 2, quarter[3]), // changes the live set, not what is missing
	}
	vs := CheckCoverage(h, []Window{{From: 0, To: secs(4)}})
	if len(vs) != 1 || vs[0].At != secs(2) || !vs[0].Ranges.Equal(lease.Ranges{quarter[1]}) {
		t.Fatalf("violations = %v, want one gap of %v at 2s", vs, quarter[1])
	}
	// Nothing at all in a window is one gap of the whole ring.
	vs = CheckCoverage(nil, []Window{{From: 0, To: secs(1)}})
	if len(vs) != 1 || !vs[0].Ranges.Equal(full) {
		t.Fatalf("empty history: %v", vs)
	}
}

func TestCheckKept(t *testing.T) {
	h := []Interval{
		node0(iv("A", 0, 3, half[0])),
		node0(iv("A", 3, 6, half[0])),
		node0(iv("A", 6.5, 9, half[0])), // lost for half a second
		iv("B", 0, 9, half[1]),
	}
	if vs := CheckKept(h, "B", "1", secs(1), secs(9)); len(vs) != 0 {
		t.Fatalf("B kept its half: %v", vs)
	}
	if vs := CheckKept(h, "A", "1", secs(1), secs(6)); len(vs) != 0 {
		t.Fatalf("A kept its half until 6s: %v", vs)
	}
	vs := CheckKept(h, "A", "1", secs(1), secs(9))
	if len(vs) != 2 || vs[0].At != secs(6) || !vs[0].Ranges.Equal(lease.Ranges{half[0]}) || vs[1].At != secs(6) {
		t.Fatalf("violations = %v, want A's half and its Node-0 lost at 6s", vs)
	}
}

func TestFirstCovered(t *testing.T) {
	h := []Interval{
		iv("A", 0, 5, lease.FullRing),
		iv("B", 6, 9, half[0]),
		iv("C", 7, 9, half[1]),
	}
	at, ok := FirstCovered(h, lease.Ranges{half[1]}, secs(5), ExceptHolder("A", "1"))
	if !ok || at != secs(7) {
		t.Fatalf("FirstCovered = %v %v, want 7s", at, ok)
	}
	if _, ok := FirstCovered(h, full, secs(9), nil); ok {
		t.Fatal("nothing is usable after 9s")
	}
	if at, ok := FirstCovered(h, full, secs(1), nil); !ok || at != secs(1) {
		t.Fatalf("covered at once: %v %v", at, ok)
	}
}

// TestCheckerAgainstBruteForce compares the checker with a naive model on random histories: time
// in whole steps, the ring cut into eight atoms, and every property evaluated at every step.
func TestCheckerAgainstBruteForce(t *testing.T) {
	atoms := lease.Split(8)
	rapid.Check(t, func(rt *rapid.T) {
		holders := rapid.IntRange(1, 4).Draw(rt, "holders")
		n := rapid.IntRange(0, 12).Draw(rt, "intervals")
		var ivs []Interval
		masks := map[int]uint8{}
		for i := range n {
			from := rapid.IntRange(0, 20).Draw(rt, "from")
			length := rapid.IntRange(0, 8).Draw(rt, "length")
			mask := uint8(rapid.IntRange(0, 255).Draw(rt, "atoms"))
			var rs []lease.Range
			for a := range 8 {
				if mask&(1<<a) != 0 {
					rs = append(rs, atoms[a])
				}
			}
			ivs = append(ivs, Interval{
				Worker: fmt.Sprintf("w%d", rapid.IntRange(0, holders-1).Draw(rt, "holder")),
				From:   time.Duration(from), To: time.Duration(from + length),
				Ranges: lease.Normalize(rs), Node0: rapid.Bool().Draw(rt, "node0"),
			})
			masks[i] = mask
		}
		wFrom := rapid.IntRange(0, 20).Draw(rt, "window_from")
		w := Window{From: time.Duration(wFrom), To: time.Duration(wFrom + rapid.IntRange(0, 10).Draw(rt, "window_len"))}

		// The naive model: for every step, which atoms are held by two holders, whether two holders
		// are Node-0, and which atoms nobody holds.
		wantOverlap, wantNode0, wantGap := false, false, false
		for step := 0; step < 30; step++ {
			at := time.Duration(step)
			owner := map[int]string{}
			node0Holder := ""
			covered := uint8(0)
			for i, x := range ivs {
				if at < x.From || at >= x.To {
					continue
				}
				covered |= masks[i]
				for a := range 8 {
					if masks[i]&(1<<a) == 0 {
						continue
					}
					if o, ok := owner[a]; ok && o != x.Worker {
						wantOverlap = true
					}
					owner[a] = x.Worker
				}
				if x.Node0 {
					if node0Holder != "" && node0Holder != x.Worker {
						wantNode0 = true
					}
					node0Holder = x.Worker
				}
			}
			if w.From <= at && at < w.To && covered != 0xff {
				wantGap = true
			}
		}
		if got := len(CheckExclusive(ivs)) > 0; got != wantOverlap {
			rt.Fatalf("overlap: checker %v, model %v", got, wantOverlap)
		}
		if got := len(CheckNode0(ivs)) > 0; got != wantNode0 {
			rt.Fatalf("node0: checker %v, model %v", got, wantNode0)
		}
		if got := len(CheckCoverage(ivs, []Window{w})) > 0; got != wantGap {
			rt.Fatalf("gap: checker %v, model %v", got, wantGap)
		}
	})
}
