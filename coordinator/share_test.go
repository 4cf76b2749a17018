package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// The split itself: in proportion to tokens among the members with work, by tokens when none has
// work, nothing without ranges; never more than the limit in all.
func TestSplitRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members map[string]memberWork
		want    map[string]float64
	}{
		{"all with work", map[string]memberWork{"a": {0.5, true}, "b": {0.25, true}, "c": {0.25, true}},
			map[string]float64{"a": 30, "b": 15, "c": 15}},
		{"one idle", map[string]memberWork{"a": {0.5, true}, "b": {0.25, true}, "c": {0.25, false}},
			map[string]float64{"a": 40, "b": 20, "c": 0}},
		{"only the small one has work", map[string]memberWork{"a": {0.9, false}, "b": {0.1, true}},
			map[string]float64{"a": 0, "b": 60}},
		{"none with work: by tokens", map[string]memberWork{"a": {0.5, false}, "b": {0.25, false}, "c": {0.25, false}},
			map[string]float64{"a": 30, "b": 15, "c": 15}},
		{"a member without ranges", map[string]memberWork{"a": {0.5, true}, "b": {0.5, false}, "c": {0, true}},
			map[string]float64{"a": 60, "b": 0, "c": 0}},
		{"tokens not all assigned, none with work", map[string]memberWork{"a": {0.5, false}, "b": {0, true}},
			map[string]float64{"a": 30, "b": 0}},
		{"tokens not all assigned, some with work", map[string]memberWork{"a": {0.5, true}, "b": {0.25, false}},
			map[string]float64{"a": 60, "b": 0}},
		{"no members", map[string]memberWork{}, map[string]float64{}},
	} {
		got := splitRate(60, tc.members)
		sum := 0.0
		for k, v := range got {
			sum += v
			if !near(v, tc.want[k]) {
				t.Errorf("%s: %s gets %v, want %v", tc.name, k, v, tc.want[k])
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: shares for %d members, want %d", tc.name, len(got), len(tc.want))
		}
		if sum > 60*(1+1e-12) {
			t.Errorf("%s: shares add up to %v, over the limit 60", tc.name, sum)
		}
	}
	// A settled ring of n equal members: the parts add up to the limit.
	for n := 1; n <= 7; n++ {
		members := map[string]memberWork{}
		for i, r := range lease.Split(n) {
			members[fmt.Sprint(i)] = memberWork{fraction: lease.Ranges{r}.Fraction(), work: i%2 == 0}
		}
		sum := 0.0
		for _, v := range splitRate(300, members) {
			sum += v
		}
		if !near(sum, 300) {
			t.Errorf("%d members: shares add up to %v, want 300", n, sum)
		}
	}
}

// idleReportOf is a report that says its worker finished everything readable.
func idleReportOf(worker string, done uint64) lease.Report {
	return lease.Report{WorkerID: worker, Executions: execs(done, 0)}
}

// The work view the split reads: a member is idle only on two fresh reports half a period apart
// that say nothing is pending, no window is unfinished and nothing was executed between them.
func TestWorkViewFromReports(t *testing.T) {
	s := newReportStore(period)
	w := member("w1", "i1")
	idle := func(at time.Duration) bool {
		got, _ := s.idle(w, t0.Add(at))
		return got
	}
	if idle(0) {
		t.Fatalf("a member without a report is idle; want it to have work")
	}
	if s.put(w, idleReportOf("w1", 7), t0) || idle(0) {
		t.Fatalf("one report made the member idle: it may precede the worker's first pass")
	}
	if s.put(w, idleReportOf("w1", 7), t0.Add(period/4)) || idle(period/4) {
		t.Fatalf("a second report a quarter period later made the member idle")
	}
	gen := s.workGen()
	if !s.put(w, idleReportOf("w1", 7), t0.Add(period)) || !idle(period) {
		t.Fatalf("two idle reports a period apart: not idle, or the change was not reported")
	}
	if s.workGen() == gen {
		t.Fatalf("the work view changed but its generation did not")
	}
	// Fresh for three periods after the last receipt, unknown (so with work) after.
	if !idle(4*period) || idle(4*period+time.Millisecond) {
		t.Fatalf("idle at 4 periods %v, a millisecond later %v; want true then false", idle(4*period), idle(4*period+time.Millisecond))
	}
	if _, staleAt := s.idle(w, t0.Add(period)); !staleAt.Equal(t0.Add(4 * period)) {
		t.Fatalf("stale at %v, want %v", staleAt, t0.Add(4*period))
	}
	for name, r := range map[string]lease.Report{
		"rows pending":                {WorkerID: "w1", Executions: execs(7, 0), PendingRows: 3},
		"a window it could not count": {WorkerID: "w1", Executions: execs(7, 0), OldestWindowStartMs: t0.UnixMilli()},
		"executions since the base":   {WorkerID: "w1", Executions: execs(7, 1)},
	} {
		s := newReportStore(period)
		s.put(w, idleReportOf("w1", 7), t0)
		s.put(w, r, t0.Add(period))
		if got, _ := s.idle(w, t0.Add(period)); got {
			t.Errorf("%s: idle; want work", name)
		}
	}
}

// shareOf is the share the book gives worker in s's ring testRing at index and now.
func shareOf(t *testing.T, b *shareBook, s *fsm.State, index uint64, worker string, now time.Time) float64 {
	t.Helper()
	share, ok := b.share(s.Ring(testRing), index, mid(worker).Key(), now)
	if !ok {
		t.Fatalf("no limit")
	}
	return share
}

// The book over a real state: by tokens without reports; an idle member's share goes to the
// others, and comes back when its report turns stale or it reports work; no limit, no share.
func TestShareBookFollowsTheReports(t *testing.T) {
	s := fsm.NewState()
	apply(t, s, join("a"), join("b"), join("c"))
	planAll(t, s)
	reports := newReportStore(period)
	b := newShareBook(reports)
	if _, ok := b.share(s.Ring(testRing), 1, mid("a").Key(), t0); ok {
		t.Fatalf("a share without a limit")
	}
	apply(t, s, &fsm.Limit{Ring: testRing, PerSecond: 60})
	const index = 2
	for _, w := range []string{"a", "b", "c"} {
		if got := shareOf(t, b, s, index, w, t0); !near(got, 20) {
			t.Fatalf("no reports (a new leader): %s gets %v, want 20 (by tokens)", w, got)
		}
	}
	for _, w := range []string{"b", "c"} {
		reports.put(mid(w), idleReportOf(w, 5), t0)
		reports.put(mid(w), idleReportOf(w, 5), t0.Add(period))
	}
	reports.put(mid("a"), lease.Report{WorkerID: "a", PendingRows: 900}, t0.Add(period))
	at := t0.Add(period)
	if a, bb, c := shareOf(t, b, s, index, "a", at), shareOf(t, b, s, index, "b", at), shareOf(t, b, s, index, "c", at); !near(a, 60) || bb != 0 || c != 0 {
		t.Fatalf("b and c idle: shares %v, %v, %v; want 60, 0, 0", a, bb, c)
	}
	// c's report turns stale: it may have work again.
	at = t0.Add(4*period + time.Millisecond)
	reports.put(mid("b"), idleReportOf("b", 5), at)
	if a, c := shareOf(t, b, s, index, "a", at), shareOf(t, b, s, index, "c", at); !near(a, 30) || !near(c, 30) {
		t.Fatalf("c's report stale: a %v, c %v; want 30 each", a, c)
	}
	// Everyone idle: by tokens again.
	reports.put(mid("a"), idleReportOf("a", 0), at)
	reports.put(mid("c"), idleReportOf("c", 5), at)
	reports.put(mid("c"), idleReportOf("c", 5), at.Add(period))
	reports.put(mid("a"), idleReportOf("a", 0), at.Add(period))
	at = at.Add(period)
	for _, w := range []string{"a", "b", "c"} {
		if got := shareOf(t, b, s, index, w, at); !near(got, 20) {
			t.Fatalf("none with work: %s gets %v, want 20", w, got)
		}
	}
	// b reports work again.
	reports.put(mid("b"), lease.Report{WorkerID: "b", PendingRows: 1}, at)
	if got := shareOf(t, b, s, index, "b", at); !near(got, 60) {
		t.Fatalf("only b with work: b gets %v, want 60", got)
	}
}
