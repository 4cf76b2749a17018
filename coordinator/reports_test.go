package coordinator

import (
	"math"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
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
	}{{0, admin.ReportFresh}, {3 * period, admin.ReportFresh}, {3*period + time.Millisecond, admin.ReportUnknown}, {time.Hour, admin.ReportUnknown}} {
		mr := s.view(w1, t0.Add(tc.at))
		if mr.State != tc.state || mr.AgeMs == nil || *mr.AgeMs != tc.at.Milliseconds() {
			t.Errorf("after %v: state %s age %v; want %s, %d ms", tc.at, mr.State, mr.AgeMs, tc.state, tc.at.Milliseconds())
		}
		if mr.Report == nil || mr.PendingRows != 4 {
			t.Errorf("after %v: the last report's figures are gone: %+v", tc.at, mr.Report)
		}
	}
	if mr := s.view(member("w2", "i1"), t0); mr.State != admin.ReportUnknown || mr.AgeMs != nil || mr.Report != nil {
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

// TestBacklogHistoryIsBounded: a ring keeps the samples of the last ten minutes, oldest first;
// a ring that is gone is forgotten.
func TestBacklogHistoryIsBounded(t *testing.T) {
	h := newBacklogHistory(period)
	age := func(ms int64) *admin.BacklogView { return &admin.BacklogView{State: admin.ReportFresh, AgeMs: &ms} }
	orders := admin.RingStateView{Region: testRing.Region, Cluster: testRing.Cluster, Service: testRing.Service}
	payments := orders
	payments.Service = "payments"
	steps := int(admin.BacklogSpan/period) + 30
	for i := range steps {
		orders.Backlog = age(int64(i))
		if i%10 == 9 {
			orders.Backlog = &admin.BacklogView{State: admin.ReportUnknown}
		}
		h.record(t0.Add(time.Duration(i)*period), []admin.RingStateView{orders, payments})
	}
	got := h.series()["eu/c1/orders"]
	if len(got) != int(admin.BacklogSpan/period) || got[len(got)-1].At != t0.Add(time.Duration(steps-1)*period) || got[0].AgeMs != 30 {
		t.Fatalf("%d samples, last at %v, first age %d; want %d, the newest, from 30", len(got), got[len(got)-1].At, got[0].AgeMs, int(admin.BacklogSpan/period))
	}
	if got[len(got)-1].Known || !got[len(got)-2].Known {
		t.Errorf("unknown samples must stay unknown, known ones known")
	}
	if p := h.series()["eu/c1/payments"]; len(p) != len(got) || p[0].Known {
		t.Errorf("payments without a backlog: %d samples, first known %v; want unknown samples", len(p), p[0].Known)
	}
	h.record(t0.Add(time.Hour), []admin.RingStateView{orders})
	if _, ok := h.series()["eu/c1/payments"]; ok || len(h.byRing) != 1 {
		t.Errorf("a ring that is gone is still kept: %d rings", len(h.byRing))
	}
}
