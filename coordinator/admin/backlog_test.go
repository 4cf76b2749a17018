package admin

import (
	"reflect"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// t0 and testRing are the time and the ring of the tests of this package.
var (
	t0       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	testRing = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
)

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
	b := RingBacklog(both, now)
	if b.State != ReportFresh || b.AgeMs == nil || *b.AgeMs != (5*time.Minute).Milliseconds() || b.PendingRows != 42 || len(b.ReportsUnknown) != 0 {
		t.Errorf("both halves fresh: %+v (age %v); want fresh, 5 min, 42 rows", b, b.AgeMs)
	}

	// Node-0 sees a directory window older than any range's: a range nobody drains still shows.
	both.Members[0].Report.DirectoryOldestWindowStartMs = ms(time.Hour)
	if b := RingBacklog(both, now); *b.AgeMs != time.Hour.Milliseconds() || b.OldestWindowStartMs != ms(time.Hour) {
		t.Errorf("Node-0's directory window: age %d ms; want an hour", *b.AgeMs)
	}

	// Only Node-0 is fresh: its directory window vouches for the whole ring.
	node0Only := ringOf(
		activeMember("w1", 0, halves[0], fresh(lease.Report{DirectoryOldestWindowStartMs: ms(3 * time.Minute)}, nil, 0)),
		activeMember("w2", 1, halves[1], stale(lease.Report{OldestWindowStartMs: ms(time.Minute)})),
	)
	b = RingBacklog(node0Only, now)
	if b.State != ReportFresh || *b.AgeMs != (3*time.Minute).Milliseconds() || !reflect.DeepEqual(b.ReportsUnknown, []string{"w2"}) {
		t.Errorf("Node-0 fresh, w2 stale: %+v; want fresh at 3 min, w2 unknown", b)
	}

	// Node-0 fresh without a directory window, the other half unknown: not "fine".
	node0Only.Members[0].Report.DirectoryOldestWindowStartMs = 0
	if b := RingBacklog(node0Only, now); b.State != ReportUnknown || b.AgeMs != nil {
		t.Errorf("half the ring unknown: %+v; want unknown with no age", b)
	}

	// The non-Node-0 half alone does not cover the ring either.
	half := ringOf(
		activeMember("w1", 0, halves[0], nil),
		activeMember("w2", 1, halves[1], fresh(lease.Report{}, nil, 0)),
	)
	if b := RingBacklog(half, now); b.State != ReportUnknown || !reflect.DeepEqual(b.ReportsUnknown, []string{"w1"}) {
		t.Errorf("w1 never reported: %+v; want unknown, w1 listed", b)
	}

	// Everyone fresh, nothing pending: the age is 0, not unknown.
	idle := ringOf(activeMember("w1", 0, lease.FullRing, fresh(lease.Report{}, nil, 0)))
	if b := RingBacklog(idle, now); b.State != ReportFresh || *b.AgeMs != 0 || b.OldestWindowStartMs != 0 {
		t.Errorf("drained ring: %+v; want fresh, age 0", b)
	}

	// A window that starts after now (a writer's W+1 in the directory) is no negative age.
	ahead := ringOf(activeMember("w1", 0, lease.FullRing, fresh(lease.Report{DirectoryOldestWindowStartMs: now.Add(time.Minute).UnixMilli()}, nil, 0)))
	if b := RingBacklog(ahead, now); *b.AgeMs != 0 {
		t.Errorf("future window: age %d; want 0", *b.AgeMs)
	}

	if b := RingBacklog(ringOf(), now); b.State != ReportUnknown || b.AgeMs != nil {
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
	b := RingBacklog(r, t0)
	want := map[string]float64{"done": 6, "transient": 1, "permanent": 0, "not_sent": 0, "other": 0.5}
	if !reflect.DeepEqual(b.ExecutionsPerS, want) || b.DeadLettersPerHour != 4 || b.PendingRows != 12 {
		t.Errorf("sums: exec/s %v, dead letters/h %v, pending %d; want %v, 4, 12", b.ExecutionsPerS, b.DeadLettersPerHour, b.PendingRows, want)
	}
	wantBreakers := []OpenBreaker{{WorkerID: "w1", BreakerReport: lease.BreakerReport{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: 1_800_000_000_000}}}
	if !reflect.DeepEqual(b.OpenBreakers, wantBreakers) || !reflect.DeepEqual(b.LeaseUnfit, []string{"w1"}) || !reflect.DeepEqual(b.ReportsUnknown, []string{"w3"}) {
		t.Errorf("breakers %+v, unfit %v, unknown %v", b.OpenBreakers, b.LeaseUnfit, b.ReportsUnknown)
	}
	if b := RingBacklog(ringOf(), t0); !reflect.DeepEqual(b.ExecutionsPerS, map[string]float64{"done": 0, "transient": 0, "permanent": 0, "not_sent": 0}) {
		t.Errorf("no reports: exec/s %v; want the four outcomes at 0", b.ExecutionsPerS)
	}
}
