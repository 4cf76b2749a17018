package swarm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ringA = lease.RingKey{Region: "r", Cluster: "c", Service: "a"}
	ringB = lease.RingKey{Region: "r", Cluster: "c", Service: "b"}
)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// el is an element installed at `got`, valid until `end`, from coordinator `from`.
func el(got, end float64, epoch uint64, node int, from string, rs ...lease.Range) Install {
	return Install{At: at(got), ValidFrom: at(got), End: at(end), Epoch: epoch, Generation: 1, NodeIndex: node, NodeCount: 2,
		Ranges: lease.Normalize(rs), Coordinator: from}
}

func member(id string, ring lease.RingKey, ins ...Install) MemberHistory {
	return MemberHistory{ID: id, Ring: ring, Installs: ins}
}

var (
	low  = lease.Range{Start: lease.MinToken, End: -1}
	high = lease.Range{Start: 0, End: lease.MaxToken}
)

func TestOverlapOfTwoMembersIsFound(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 5, 1, 0, "c1", low)),
		member("b", ringA, el(4, 9, 1, 1, "c1", lease.Range{Start: -10, End: 10})),
	}}
	vs := h.Overlaps(at(20))
	if len(vs) != 1 {
		t.Fatalf("overlaps %v, want one", vs)
	}
	if v := vs[0]; v.A != 0 || v.B != 1 || !v.At.Equal(at(4)) || !v.Ranges.Equal(lease.Ranges{{Start: -10, End: -1}}) {
		t.Errorf("overlap %v, want members 0 and 1 at 4 s on [-10,-1]", v)
	}
}

func TestOverlapOfOneTokenIsFound(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 5, 1, 1, "c1", lease.Range{Start: 0, End: 7})),
		member("b", ringA, el(1, 9, 1, 2, "c1", lease.Range{Start: 7, End: 20})),
	}}
	if vs := h.Overlaps(at(20)); len(vs) != 1 || !vs[0].Ranges.Equal(lease.Ranges{{Start: 7, End: 7}}) {
		t.Fatalf("overlaps %v, want one on token 7", vs)
	}
}

func TestHandoverAtTheLeaseEndIsNoOverlap(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 5, 1, 1, "c1", low)),
		member("b", ringA, el(5, 9, 2, 2, "c1", low)),
	}}
	if vs := h.Overlaps(at(20)); len(vs) != 0 {
		t.Fatalf("overlaps %v, want none: [0,5) and [5,9) do not meet", vs)
	}
}

func TestMembersOfTwoRingsNeverOverlap(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 5, 1, 0, "c1", low)),
		member("b", ringB, el(0, 5, 1, 0, "c1", low)),
	}}
	if vs := h.Overlaps(at(20)); len(vs) != 0 {
		t.Fatalf("overlaps %v across rings", vs)
	}
}

// TestANewElementTakesRangesAwayAtOnce: the guard drops what a newer element no longer carries
// when it installs it, so the dropped tokens may move right after, long before the old element's
// end.
func TestANewElementTakesRangesAwayAtOnce(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 10, 1, 0, "c1", lease.FullRing), el(3, 12, 2, 0, "c1", low)),
		member("b", ringA, el(3.5, 12, 2, 1, "c1", high)),
	}}
	if vs := h.Overlaps(at(20)); len(vs) != 0 {
		t.Fatalf("overlaps %v, want none", vs)
	}
	// The same handover before the shrink is an overlap.
	h.Members[1].Installs[0] = el(2.5, 12, 2, 1, "c1", high)
	if vs := h.Overlaps(at(20)); len(vs) != 1 || !vs[0].At.Equal(at(2.5)) {
		t.Fatalf("overlaps %v, want one at 2.5 s", vs)
	}
}

func TestTwoNode0sAreAnOverlap(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(0, 5, 1, 0, "c1", low)),
		member("b", ringA, el(1, 5, 1, 0, "c1", high)),
	}}
	if vs := h.Overlaps(at(20)); len(vs) != 1 || !vs[0].Node0 || !vs[0].Ranges.Empty() {
		t.Fatalf("overlaps %v, want one of Node-0 alone", vs)
	}
}

func TestStoppedMemberHoldsNothing(t *testing.T) {
	a := member("a", ringA, el(0, 10, 1, 0, "c1", low))
	a.Stopped = at(2)
	h := History{Members: []MemberHistory{a, member("b", ringA, el(3, 9, 2, 1, "c1", low))}}
	if vs := h.Overlaps(at(20)); len(vs) != 0 {
		t.Fatalf("overlaps %v after a stopped at 2 s", vs)
	}
	if ls := h.Lapses(0, at(0), at(20)); len(ls) != 0 {
		t.Fatalf("lapses %v of a stopped member", ls)
	}
}

func TestLapses(t *testing.T) {
	h := History{Members: []MemberHistory{member("a", ringA,
		el(1, 4, 1, 0, "c1", low), el(3, 6, 1, 0, "c1", low), // renewed in time
		el(7, 9, 1, 0, "c2", low), // 1 s without a lease
		el(8.5, 8.6, 1, 0, "c2"),  // an element with no range is no lease: 9 s on is a lapse
	)}}
	ls := h.Lapses(0, at(0), at(10))
	if len(ls) != 2 {
		t.Fatalf("lapses %v, want two", ls)
	}
	if !ls[0].From.Equal(at(6)) || ls[0].Length() != secs(1) {
		t.Errorf("first lapse %v, want [6 s, 7 s)", ls[0])
	}
	if !ls[1].From.Equal(at(8.5)) || !ls[1].To.Equal(at(10)) {
		t.Errorf("second lapse %v, want [8.5 s, 10 s)", ls[1])
	}
	// Nothing is owed before the first element, nor outside the window asked about.
	if ls := h.Lapses(0, at(2), at(5)); len(ls) != 0 {
		t.Errorf("lapses %v in [2 s, 5 s)", ls)
	}
}

// TestFaultReport: the leader "old" dies at 10 s; "new" renews a in time, b after its lease ran
// out and with a new assignment (the ring's generation moved), and c never.
func TestFaultReport(t *testing.T) {
	gen := func(in Install, g uint64) Install { in.Generation = g; return in }
	h := History{Members: []MemberHistory{
		member("a", ringA, el(8, 12, 1, 0, "old", low), el(10.5, 14, 1, 0, "new", low)),
		member("b", ringA, el(8, 10.8, 1, 1, "old", high), gen(el(11.5, 15, 3, 1, "new", high), 2)),
		member("c", ringB, el(8, 12, 1, 0, "old", lease.FullRing)),
	}}
	r := h.Fault(at(10), at(13.5), "old")
	if r.Members != 3 || r.Held != 3 {
		t.Errorf("members %d held %d, want 3 and 3", r.Members, r.Held)
	}
	if r.RanOut != 2 || r.Lapsed != 2 {
		t.Errorf("ran out %d lapsed %d, want 2 (b, c) and 2", r.RanOut, r.Lapsed)
	}
	if r.LongestLapse != secs(1.5) {
		t.Errorf("longest lapse %v, want c's 1.5 s (from 12 s to the end of the window)", r.LongestLapse)
	}
	if len(r.Renewed) != 2 || r.Renewed[0] != secs(0.5) || r.Renewed[1] != secs(1.5) || r.NotRenewed != 1 {
		t.Errorf("renewed after %v, not renewed %d", r.Renewed, r.NotRenewed)
	}
	if r.NewAssignment != 1 || r.RingsChanged != 1 {
		t.Errorf("new assignments %d, rings changed %d, want 1 and 1", r.NewAssignment, r.RingsChanged)
	}
	if len(r.Overlaps) != 0 {
		t.Errorf("overlaps %v", r.Overlaps)
	}
}

// TestElementsOfTheFaultedNodeAreNoRenewal: a node that goes on serving after the fault (as one
// handing leadership over on SIGTERM does) keeps its members' leases, but that is not a renewal
// by another coordinator.
func TestElementsOfTheFaultedNodeAreNoRenewal(t *testing.T) {
	h := History{Members: []MemberHistory{
		member("a", ringA, el(8, 12, 1, 0, "old", low), el(10.2, 14, 1, 0, "old", low), el(13, 17, 1, 0, "new", low)),
	}}
	r := h.Fault(at(10), at(16), "old")
	if r.RanOut != 0 || r.Lapsed != 0 || len(r.Renewed) != 1 || r.Renewed[0] != secs(3) {
		t.Errorf("report %+v, want no lapse and a renewal by new 3 s after", r)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := Percentile(ds, 0.5); p != 100*time.Millisecond {
		t.Errorf("p50 %v", p)
	}
	if p := Percentile(ds, 0.99); p != 198*time.Millisecond {
		t.Errorf("p99 %v", p)
	}
	if p := Percentile(ds, 1); p != 200*time.Millisecond {
		t.Errorf("max %v", p)
	}
	if p := Percentile(nil, 0.5); p != 0 {
		t.Errorf("empty %v", p)
	}
}

// TestOverlapsAgainstANaiveScan checks the sweep against a slow model that asks, at every instant
// an element was installed, what each member's guard holds right then (its last element, if not
// yet ended) and compares every pair.
func TestOverlapsAgainstANaiveScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 500 {
		h := randomHistory(rng)
		until := at(30)
		want := naiveConflicts(h, until)
		got := map[[2]int]bool{}
		for _, o := range h.Overlaps(until) {
			a, b := min(o.A, o.B), max(o.A, o.B)
			got[[2]int{a, b}] = true
		}
		for p := range want {
			if !got[p] {
				t.Fatalf("trial %d: the naive scan finds members %v overlapping, the sweep does not\n%+v", trial, p, h)
			}
		}
		for p := range got {
			if !want[p] {
				t.Fatalf("trial %d: the sweep reports members %v overlapping, the naive scan does not\n%+v", trial, p, h)
			}
		}
	}
}

func randomHistory(rng *rand.Rand) History {
	tokens := []int64{lease.MinToken, -1000, -1, 0, 1, 999, lease.MaxToken}
	var h History
	for i := range 2 + rng.IntN(3) {
		m := member(string(rune('a'+i)), []lease.RingKey{ringA, ringB}[rng.IntN(2)])
		t := rng.Float64() * 5
		for range rng.IntN(5) {
			a, b := tokens[rng.IntN(len(tokens))], tokens[rng.IntN(len(tokens))]
			in := el(t, t+0.5+rng.Float64()*4, uint64(1+rng.IntN(3)), rng.IntN(3), "c1", lease.Range{Start: min(a, b), End: max(a, b)})
			if rng.IntN(6) == 0 {
				in.Ranges = nil
			}
			m.Installs = append(m.Installs, in)
			t += rng.Float64() * 3
		}
		if rng.IntN(4) == 0 {
			m.Stopped = at(rng.Float64() * 15)
		}
		h.Members = append(h.Members, m)
	}
	return h
}

// naiveConflicts is the model: what the guard of m holds at instant t is its last element
// installed at or before t, while that element has not ended, m has not stopped and t < until.
func naiveConflicts(h History, until time.Time) map[[2]int]bool {
	holds := func(m MemberHistory, t time.Time) (Install, bool) {
		if !t.Before(until) || (!m.Stopped.IsZero() && !t.Before(m.Stopped)) {
			return Install{}, false
		}
		var last *Install
		for k := range m.Installs {
			if !m.Installs[k].At.After(t) {
				last = &m.Installs[k]
			}
		}
		if last == nil || !t.Before(last.End) || last.Ranges.Empty() {
			return Install{}, false
		}
		return *last, true
	}
	out := map[[2]int]bool{}
	for _, m := range h.Members {
		for _, probe := range m.Installs {
			for i := range h.Members {
				for j := i + 1; j < len(h.Members); j++ {
					if h.Members[i].Ring != h.Members[j].Ring {
						continue
					}
					a, okA := holds(h.Members[i], probe.At)
					b, okB := holds(h.Members[j], probe.At)
					if okA && okB && (a.Ranges.Overlaps(b.Ranges) || (a.NodeIndex == 0 && b.NodeIndex == 0)) {
						out[[2]int{i, j}] = true
					}
				}
			}
		}
	}
	return out
}
