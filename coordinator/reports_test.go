package coordinator

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// period is the report period of these tests: the protocol's.
const period = lease.ReportPeriod

func member(worker, inc string) memberID {
	return memberID{Ring: fsm.RingID(testRing), WorkerID: worker, Incarnation: inc}
}

func execs(done, transient uint64) map[string]uint64 {
	return map[string]uint64{"done": done, "transient": transient, "permanent": 0, "not_sent": 0}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestReportTurnsUnknownAfterThreePeriods: a report is fresh for three periods after its receipt
// and unknown from then on; a member that never reported is unknown with no age.
func TestReportTurnsUnknownAfterThreePeriods(t *testing.T) {
	s := newReportStore(period)
	w1 := member("w1", "i1")
	s.put(w1, lease.Report{WorkerID: "w1", PendingRows: 4}, t0)

	for _, tc := range []struct {
		at    time.Duration
		state string
	}{{0, ReportFresh}, {3 * period, ReportFresh}, {3*period + time.Millisecond, ReportUnknown}, {time.Hour, ReportUnknown}} {
		mr := s.view(w1, t0.Add(tc.at))
		if mr.State != tc.state || mr.AgeMs == nil || *mr.AgeMs != tc.at.Milliseconds() {
			t.Errorf("after %v: state %s age %v; want %s, %d ms", tc.at, mr.State, mr.AgeMs, tc.state, tc.at.Milliseconds())
		}
		if mr.Report == nil || mr.PendingRows != 4 {
			t.Errorf("after %v: the last report's figures are gone: %+v", tc.at, mr.Report)
		}
	}
	if mr := s.view(member("w2", "i1"), t0); mr.State != ReportUnknown || mr.AgeMs != nil || mr.Report != nil {
		t.Errorf("a member without a report: %+v; want unknown, no age, no figures", mr)
	}
}

// TestReportRatesFromTwoReports: rates are the counters' increase over the time between two
// receipts; a report that follows the last by less than half a period does not shorten the span.
func TestReportRatesFromTwoReports(t *testing.T) {
	s := newReportStore(period)
	w1 := member("w1", "i1")
	s.put(w1, lease.Report{WorkerID: "w1", Executions: execs(10, 2), DeadLettered: 1}, t0)
	if mr := s.view(w1, t0); mr.ExecutionsPerS != nil || mr.DeadLettersPerHour != nil {
		t.Fatalf("one report gave rates %v, %v", mr.ExecutionsPerS, mr.DeadLettersPerHour)
	}
	s.put(w1, lease.Report{WorkerID: "w1", Executions: execs(60, 2), DeadLettered: 3}, t0.Add(period))
	mr := s.view(w1, t0.Add(period))
	if !near(mr.ExecutionsPerS["done"], 10) || !near(mr.ExecutionsPerS["transient"], 0) || mr.DeadLettersPerHour == nil || !near(*mr.DeadLettersPerHour, 1440) {
		t.Errorf("rates %v, dead letters/h %v; want done 10/s, transient 0/s, 2 per 5 s = 1440/h", mr.ExecutionsPerS, *mr.DeadLettersPerHour)
	}
	// The report a worker sends at once after a new lease, 10 ms after a periodic one.
	s.put(w1, lease.Report{WorkerID: "w1", Executions: execs(61, 2), DeadLettered: 3}, t0.Add(period+10*time.Millisecond))
	mr = s.view(w1, t0.Add(period+10*time.Millisecond))
	if want := 51 / (period + 10*time.Millisecond).Seconds(); !near(mr.ExecutionsPerS["done"], want) || mr.Executions["done"] != 61 {
		t.Errorf("after a close report: done %v/s (want %v, from the first report), last count %d", mr.ExecutionsPerS["done"], want, mr.Executions["done"])
	}
	s.put(w1, lease.Report{WorkerID: "w1", Executions: execs(161, 2), DeadLettered: 3}, t0.Add(2*period+10*time.Millisecond))
	if mr := s.view(w1, t0.Add(2*period+10*time.Millisecond)); !near(mr.ExecutionsPerS["done"], 20) {
		t.Errorf("next periodic report: done %v/s; want 100 per 5 s = 20", mr.ExecutionsPerS["done"])
	}
}

// TestReportCounterReset: a counter that went down started again from zero, so the rate counts
// its new value; a new incarnation is a new member whose counters owe nothing to the old one's.
func TestReportCounterReset(t *testing.T) {
	s := newReportStore(period)
	old := member("w1", "i1")
	s.put(old, lease.Report{WorkerID: "w1", Executions: execs(1000, 0), DeadLettered: 50}, t0)
	s.put(old, lease.Report{WorkerID: "w1", Executions: execs(20, 0), DeadLettered: 2}, t0.Add(period))
	mr := s.view(old, t0.Add(period))
	if !near(mr.ExecutionsPerS["done"], 4) || !near(*mr.DeadLettersPerHour, 2*3600/period.Seconds()) {
		t.Errorf("after a reset: done %v/s, dead letters %v/h; want 4/s and %v/h", mr.ExecutionsPerS["done"], *mr.DeadLettersPerHour, 2*3600/period.Seconds())
	}

	renewed := member("w1", "i2")
	s.put(renewed, lease.Report{WorkerID: "w1", Executions: execs(3, 0)}, t0.Add(2*period))
	if mr := s.view(renewed, t0.Add(2*period)); mr.ExecutionsPerS != nil || mr.Executions["done"] != 3 {
		t.Errorf("a new incarnation's first report: rates %v, done %d; want no rate yet, 3", mr.ExecutionsPerS, mr.Executions["done"])
	}
	if mr := s.view(old, t0.Add(2*period)); mr.Executions["done"] != 20 {
		t.Errorf("the old incarnation's report changed: %d", mr.Executions["done"])
	}
}

// TestReportStorePrunesMembersThatLeft: the store keeps what keep accepts and nothing else, so
// members coming and going leave no trace.
func TestReportStorePrunesMembersThatLeft(t *testing.T) {
	s := newReportStore(period)
	stay := member("w0", "i")
	for i := range 1000 {
		s.put(member("gone", string(rune('a'+i%26))+string(rune('a'+i/26))), lease.Report{}, t0)
	}
	s.put(stay, lease.Report{PendingRows: 1}, t0)
	s.prune(func(m memberID) bool { return m == stay })
	if len(s.byMember) != 1 || s.view(stay, t0).PendingRows != 1 {
		t.Fatalf("after pruning: %d members; want only the one that stayed", len(s.byMember))
	}
}

// ringOf builds a ring view of members with the given ranges (nil: joining) and reports.
func ringOf(members ...MemberView) RingStateView {
	return RingStateView{Region: testRing.Region, Cluster: testRing.Cluster, Service: testRing.Service, Members: members}
}

func fresh(r lease.Report, perS map[string]float64, dlPerHour float64) *MemberReport {
	age := int64(1000)
	return &MemberReport{State: ReportFresh, AgeMs: &age, ExecutionsPerS: perS, DeadLettersPerHour: &dlPerHour, Report: &r}
}

func stale(r lease.Report) *MemberReport {
	age := int64(60_000)
	return &MemberReport{State: ReportUnknown, AgeMs: &age, Report: &r}
}

func activeMember(id string, index int, rg lease.Range, rep *MemberReport) MemberView {
	return MemberView{WorkerID: id, Incarnation: id + "-i", NodeIndex: index, Epoch: 1, State: MemberActive,
		Ranges: lease.EncodeRanges(lease.Ranges{rg}), Report: rep}
}

// TestBacklogAgeAndCoverage: the backlog age is now minus the oldest window of the fresh
// reports, Node-0's directory window included; it is unknown unless the fresh reports cover every
// token or Node-0 saw a directory window.
func TestBacklogAgeAndCoverage(t *testing.T) {
	halves := lease.Split(2)
	now := t0
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }

	both := ringOf(
		activeMember("w1", 0, halves[0], fresh(lease.Report{OldestWindowStartMs: ms(2 * time.Minute), PendingRows: 30}, nil, 0)),
		activeMember("w2", 1, halves[1], fresh(lease.Report{OldestWindowStartMs: ms(5 * time.Minute), PendingRows: 12}, nil, 0)),
	)
	b := ringBacklog(both, now)
	if b.State != ReportFresh || b.AgeMs == nil || *b.AgeMs != (5*time.Minute).Milliseconds() || b.PendingRows != 42 || len(b.ReportsUnknown) != 0 {
		t.Errorf("both halves fresh: %+v (age %v); want fresh, 5 min, 42 rows", b, b.AgeMs)
	}

	// Node-0 sees a directory window older than any range's: a range nobody drains still shows.
	both.Members[0].Report.DirectoryOldestWindowStartMs = ms(time.Hour)
	if b := ringBacklog(both, now); *b.AgeMs != time.Hour.Milliseconds() || b.OldestWindowStartMs != ms(time.Hour) {
		t.Errorf("Node-0's directory window: age %d ms; want an hour", *b.AgeMs)
	}

	// Only Node-0 is fresh: its directory window vouches for the whole ring.
	node0Only := ringOf(
		activeMember("w1", 0, halves[0], fresh(lease.Report{DirectoryOldestWindowStartMs: ms(3 * time.Minute)}, nil, 0)),
		activeMember("w2", 1, halves[1], stale(lease.Report{OldestWindowStartMs: ms(time.Minute)})),
	)
	b = ringBacklog(node0Only, now)
	if b.State != ReportFresh || *b.AgeMs != (3*time.Minute).Milliseconds() || !reflect.DeepEqual(b.ReportsUnknown, []string{"w2"}) {
		t.Errorf("Node-0 fresh, w2 stale: %+v; want fresh at 3 min, w2 unknown", b)
	}

	// Node-0 fresh without a directory window, the other half unknown: not "fine".
	node0Only.Members[0].Report.DirectoryOldestWindowStartMs = 0
	if b := ringBacklog(node0Only, now); b.State != ReportUnknown || b.AgeMs != nil {
		t.Errorf("half the ring unknown: %+v; want unknown with no age", b)
	}

	// The non-Node-0 half alone does not cover the ring either.
	half := ringOf(
		activeMember("w1", 0, halves[0], nil),
		activeMember("w2", 1, halves[1], fresh(lease.Report{}, nil, 0)),
	)
	if b := ringBacklog(half, now); b.State != ReportUnknown || !reflect.DeepEqual(b.ReportsUnknown, []string{"w1"}) {
		t.Errorf("w1 never reported: %+v; want unknown, w1 listed", b)
	}

	// Everyone fresh, nothing pending: the age is 0, not unknown.
	idle := ringOf(activeMember("w1", 0, lease.FullRing, fresh(lease.Report{}, nil, 0)))
	if b := ringBacklog(idle, now); b.State != ReportFresh || *b.AgeMs != 0 || b.OldestWindowStartMs != 0 {
		t.Errorf("drained ring: %+v; want fresh, age 0", b)
	}

	// A window that starts after now (a writer's W+1 in the directory) is no negative age.
	ahead := ringOf(activeMember("w1", 0, lease.FullRing, fresh(lease.Report{DirectoryOldestWindowStartMs: now.Add(time.Minute).UnixMilli()}, nil, 0)))
	if b := ringBacklog(ahead, now); *b.AgeMs != 0 {
		t.Errorf("future window: age %d; want 0", *b.AgeMs)
	}

	if b := ringBacklog(ringOf(), now); b.State != ReportUnknown || b.AgeMs != nil {
		t.Errorf("a ring without members: %+v; want unknown", b)
	}
}

// TestBacklogSumsWhatTheMembersReport: rates, dead letters, breakers and lease fit of fresh
// reports add up by ring; departed members and unknown reports add nothing; an outcome nobody
// knows is "other".
func TestBacklogSumsWhatTheMembersReport(t *testing.T) {
	halves := lease.Split(2)
	r := ringOf(
		activeMember("w1", 0, halves[0], fresh(lease.Report{
			PendingRows: 5, LeaseFit: "execution timeout 5s + margin does not fit",
			Breakers: []lease.BreakerReport{{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: 1_800_000_000_000}},
		}, map[string]float64{"done": 2, "transient": 1, "exploded": 0.5}, 3)),
		activeMember("w2", 1, halves[1], fresh(lease.Report{PendingRows: 7}, map[string]float64{"done": 4}, 1)),
		MemberView{WorkerID: "w3", State: MemberJoining, NodeIndex: -1, Report: stale(lease.Report{PendingRows: 1000})},
		MemberView{WorkerID: "w0", State: MemberDeparted, NodeIndex: -1,
			Report: fresh(lease.Report{PendingRows: 1000, Breakers: []lease.BreakerReport{{State: lease.BreakerOpen}}}, map[string]float64{"done": 100}, 100)},
	)
	b := ringBacklog(r, t0)
	want := map[string]float64{"done": 6, "transient": 1, "permanent": 0, "not_sent": 0, "other": 0.5}
	if !reflect.DeepEqual(b.ExecutionsPerS, want) || b.DeadLettersPerHour != 4 || b.PendingRows != 12 {
		t.Errorf("sums: exec/s %v, dead letters/h %v, pending %d; want %v, 4, 12", b.ExecutionsPerS, b.DeadLettersPerHour, b.PendingRows, want)
	}
	wantBreakers := []OpenBreaker{{WorkerID: "w1", BreakerReport: lease.BreakerReport{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: 1_800_000_000_000}}}
	if !reflect.DeepEqual(b.OpenBreakers, wantBreakers) || !reflect.DeepEqual(b.LeaseUnfit, []string{"w1"}) || !reflect.DeepEqual(b.ReportsUnknown, []string{"w3"}) {
		t.Errorf("breakers %+v, unfit %v, unknown %v", b.OpenBreakers, b.LeaseUnfit, b.ReportsUnknown)
	}
	if b := ringBacklog(ringOf(), t0); !reflect.DeepEqual(b.ExecutionsPerS, map[string]float64{"done": 0, "transient": 0, "permanent": 0, "not_sent": 0}) {
		t.Errorf("no reports: exec/s %v; want the four outcomes at 0", b.ExecutionsPerS)
	}
}

// TestBacklogHistoryIsBounded: a ring keeps the samples of the last ten minutes, oldest first;
// a ring that is gone is forgotten.
func TestBacklogHistoryIsBounded(t *testing.T) {
	h := newBacklogHistory(period)
	age := func(ms int64) *BacklogView { return &BacklogView{State: ReportFresh, AgeMs: &ms} }
	orders := ringOf()
	payments := ringOf()
	payments.Service = "payments"
	steps := int(backlogSpan/period) + 30
	for i := range steps {
		orders.Backlog = age(int64(i))
		if i%10 == 9 {
			orders.Backlog = &BacklogView{State: ReportUnknown}
		}
		h.record(t0.Add(time.Duration(i)*period), []RingStateView{orders, payments})
	}
	got := h.series()["eu/c1/orders"]
	if len(got) != int(backlogSpan/period) || got[len(got)-1].at != t0.Add(time.Duration(steps-1)*period) || got[0].ageMs != 30 {
		t.Fatalf("%d samples, last at %v, first age %d; want %d, the newest, from 30", len(got), got[len(got)-1].at, got[0].ageMs, int(backlogSpan/period))
	}
	if got[len(got)-1].known || !got[len(got)-2].known {
		t.Errorf("unknown samples must stay unknown, known ones known")
	}
	if p := h.series()["eu/c1/payments"]; len(p) != len(got) || p[0].known {
		t.Errorf("payments without a backlog: %d samples, first known %v; want unknown samples", len(p), p[0].known)
	}
	h.record(t0.Add(time.Hour), []RingStateView{orders})
	if _, ok := h.series()["eu/c1/payments"]; ok || len(h.byRing) != 1 {
		t.Errorf("a ring that is gone is still kept: %d rings", len(h.byRing))
	}
}
