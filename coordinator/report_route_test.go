package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// testReportPeriod is the report period of the clusters of these tests: three periods pass
// quickly enough for a report to turn unknown while a test waits, and slowly enough that a
// loaded machine reads a report it just sent as fresh.
const testReportPeriod = time.Second

func withReportPeriod(_ int, c *Config) { c.ReportPeriod = testReportPeriod }

// report sends ring.report on the worker's current connection.
func (w *testWorker) report(r lease.Report) error {
	r.WorkerID = w.id
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return w.reportRaw(b)
}

// reportRaw sends data as a ring.report on the worker's current connection and expects an ack.
func (w *testWorker) reportRaw(data []byte) error {
	w.mu.Lock()
	client := w.client
	w.mu.Unlock()
	if client == nil {
		return errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p, err := client.RequestResponse(payload.New(data, composite(lease.RouteReport))).Block(ctx)
	if err != nil {
		return asWire(err)
	}
	var ack lease.Ack
	if err := json.Unmarshal(p.Data(), &ack); err != nil || !ack.OK {
		return errors.New("report not acknowledged: " + string(p.Data()))
	}
	return nil
}

// connectedOnly is a worker connected to addr that subscribes to nothing: no member of any ring.
func connectedOnly(t *testing.T, id, addr string) *testWorker {
	t.Helper()
	w := newTestWorker(t, id, addr)
	client, err := w.dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	w.client = client
	return w
}

// memberOf returns worker's member view in the leader's view of testRing.
func memberOf(t *testing.T, n *Node, worker string) admin.MemberView {
	t.Helper()
	r, _ := n.View().Ring(testRing)
	for _, m := range r.Members {
		if m.WorkerID == worker && m.State != admin.MemberDeparted {
			return m
		}
	}
	t.Fatalf("%s is not a member: %+v", worker, r.Members)
	return admin.MemberView{}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// series reads the value of the series whose name and labels start the line; NaN when absent.
func series(metrics, prefix string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' ')+1:]), 64); err == nil {
				return f
			}
		}
	}
	return math.NaN()
}

// TestReportsReachTheViewAndMetrics: three Raft nodes, two workers on real RSocket connections.
// The leader keeps their reports and shows them per member in /v1/ring, sums them per ring into
// the backlog and /metrics; after three periods without a report they read unknown; a member
// that leaves takes its report with it; a follower answers not_leader and shows no report.
func TestReportsReachTheViewAndMetrics(t *testing.T) {
	c := newCluster(t, 3, withReportPeriod)
	leader := c.leader()
	w1 := newTestWorker(t, "rep-1", c.rsocketAddrs()...).start()
	w2 := newTestWorker(t, "rep-2", c.rsocketAddrs()...).start()
	eventually(t, 15*time.Second, "each worker holds half the ring", func() bool {
		l1, ok1 := w1.latest()
		l2, ok2 := w2.latest()
		return ok1 && ok2 && l1.lease.NodeCount == 2 && l2.lease.NodeCount == 2 && l1.lease.Epoch > 0 && l2.lease.Epoch > 0 &&
			l1.lease.Ranges.Union(l2.lease.Ranges).Equal(lease.Ranges{lease.FullRing})
	})
	node0, other := w1, w2
	if l, _ := w2.latest(); l.lease.IsNode0() {
		node0, other = w2, w1
	}
	now := time.Now()
	dirOldest := now.Add(-10 * time.Minute).UnixMilli()
	send := func(done uint64) {
		t.Helper()
		if err := node0.report(lease.Report{
			Executions: map[string]uint64{"done": done, "transient": 1}, DeadLettered: 2, PendingRows: 5,
			OldestWindowStartMs: now.Add(-2 * time.Minute).UnixMilli(), DirectoryOldestWindowStartMs: dirOldest,
			Breakers: []lease.BreakerReport{{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: now.Add(time.Minute).UnixMilli()}},
		}); err != nil {
			t.Fatalf("report of Node-0: %v", err)
		}
		if err := other.report(lease.Report{Executions: map[string]uint64{"done": done}, PendingRows: 7,
			OldestWindowStartMs: now.Add(-time.Minute).UnixMilli(), LeaseFit: "query timeout 1s does not fit"}); err != nil {
			t.Fatalf("report of the other worker: %v", err)
		}
	}
	send(10)
	// Rates need a second report at least half a period after the first.
	time.Sleep(testReportPeriod / 2)
	send(110)

	var view admin.RingView
	getJSON(t, leader.HTTPAddr(), admin.PathRing, &view)
	r, ok := view.Ring(testRing)
	if !ok || r.Backlog == nil {
		t.Fatalf("the leader's view has no backlog: %+v", r)
	}
	b := r.Backlog
	if b.State != admin.ReportFresh || b.AgeMs == nil || *b.AgeMs < (10*time.Minute).Milliseconds() || b.OldestWindowStartMs != dirOldest {
		t.Errorf("backlog %+v (age %v); want fresh, at least 10 min old, from Node-0's directory window", b, b.AgeMs)
	}
	if b.PendingRows != 12 || b.ExecutionsPerS["done"] <= 0 || b.DeadLettersPerHour != 0 || len(b.OpenBreakers) != 1 ||
		b.OpenBreakers[0].WorkerID != node0.id || len(b.ReportsUnknown) != 0 || len(b.LeaseUnfit) != 1 || b.LeaseUnfit[0] != other.id {
		t.Errorf("backlog figures %+v", b)
	}
	for _, m := range r.Members {
		if m.Report == nil || m.Report.State != admin.ReportFresh || m.Report.AgeMs == nil || m.Report.Report == nil || m.Report.ExecutionsPerS == nil {
			t.Errorf("member %s: report %+v; want a fresh one with rates", m.WorkerID, m.Report)
		}
	}

	m := scrape(t, leader.HTTPAddr())
	ring := `{cluster="c1",region="eu",service="orders"}`
	if v := series(m, "retryring_coordinator_backlog_age_seconds"+ring); !(v >= 600) {
		t.Errorf("backlog_age_seconds %v; want 600 or more", v)
	}
	for name, want := range map[string]float64{"pending_rows": 12, "open_breakers": 1, "reports_unknown": 0, "dead_letters_per_hour": 0} {
		if v := series(m, "retryring_coordinator_"+name+ring); v != want {
			t.Errorf("%s = %v; want %v", name, v, want)
		}
	}
	if v := series(m, `retryring_coordinator_executions_per_second{cluster="c1",outcome="done",region="eu",service="orders"}`); !(v > 0) {
		t.Errorf("executions_per_second done %v; want above 0", v)
	}

	// A follower keeps nothing: not_leader with the leader's address, and no report in its view.
	follower := c.followers(leader)[0]
	probe := connectedOnly(t, "rep-probe", follower.RSocketAddr())
	var we *lease.WireError
	if err := probe.report(lease.Report{}); !errors.As(err, &we) || we.Code != lease.CodeNotLeader || we.LeaderRSocketAddr != leader.RSocketAddr() {
		t.Errorf("report to a follower: %v; want not_leader naming %s", err, leader.RSocketAddr())
	}
	var fv map[string]any
	getJSON(t, follower.HTTPAddr(), admin.PathRing, &fv)
	if b, _ := json.Marshal(fv); strings.Contains(string(b), `"report"`) || strings.Contains(string(b), `"backlog"`) {
		t.Errorf("a follower's view shows reports: %s", b)
	}
	if m := scrape(t, follower.HTTPAddr()); strings.Contains(m, "retryring_coordinator_backlog_age_seconds{") {
		t.Error("a follower exports a backlog age it does not know")
	}

	// Silence: after three periods every report reads unknown, and so does the backlog.
	eventually(t, 10*time.Second, "reports turn unknown", func() bool {
		r, _ := leader.View().Ring(testRing)
		return r.Backlog != nil && r.Backlog.State == admin.ReportUnknown && len(r.Backlog.ReportsUnknown) == 2
	})
	r, _ = leader.View().Ring(testRing)
	if r.Backlog.AgeMs != nil || r.Backlog.PendingRows != 0 || len(r.Backlog.OpenBreakers) != 0 {
		t.Errorf("an unknown backlog still shows figures: %+v", r.Backlog)
	}
	if mv := memberOf(t, leader, node0.id); mv.Report.State != admin.ReportUnknown || mv.Report.Report == nil || mv.Report.PendingRows != 5 {
		t.Errorf("Node-0's stale report: %+v; want unknown with its last figures", mv.Report)
	}
	m = scrape(t, leader.HTTPAddr())
	if v := series(m, "retryring_coordinator_backlog_age_seconds"+ring); !math.IsNaN(v) || !strings.Contains(m, "retryring_coordinator_backlog_age_seconds"+ring+" NaN") {
		t.Errorf("unknown backlog age exported as %v; want NaN", v)
	}
	if v := series(m, "retryring_coordinator_reports_unknown"+ring); v != 2 {
		t.Errorf("reports_unknown %v; want 2", v)
	}

	// A member that leaves takes its report with it (the sampler prunes within a period).
	term := leader.currentTerm()
	if err := other.leave(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the report of the member that left is dropped", func() bool {
		term.reports.mu.Lock()
		defer term.reports.mu.Unlock()
		for id := range term.reports.byMember {
			if id.WorkerID == other.id {
				return false
			}
		}
		return len(term.reports.byMember) == 1
	})
}

// TestBadReportsAreRefused: garbage, another worker's id, a report over the limits and the wrong
// interaction are bad_request, and the member's last report stays as it was; a connection that
// never joined is acknowledged and nothing is kept of it.
func TestBadReportsAreRefused(t *testing.T) {
	c := newCluster(t, 1, withReportPeriod)
	leader := c.leader()
	w := newTestWorker(t, "bad-rep", c.rsocketAddrs()...).start()
	eventually(t, 10*time.Second, "the worker holds the ring", func() bool { return w.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	if err := w.report(lease.Report{PendingRows: 3}); err != nil {
		t.Fatal(err)
	}
	tooMany := lease.Report{WorkerID: w.id, PendingRows: 99, Breakers: make([]lease.BreakerReport, lease.MaxReportBreakers+1)}
	for i := range tooMany.Breakers {
		tooMany.Breakers[i] = lease.BreakerReport{State: lease.BreakerOpen}
	}
	tooManyJSON, _ := json.Marshal(tooMany)
	for name, data := range map[string]string{
		"garbage":         `{"worker_id":`,
		"not an object":   `[1,2,3]`,
		"empty":           ``,
		"other worker":    `{"worker_id":"someone-else","pending_rows":99}`,
		"negative count":  `{"worker_id":"bad-rep","executions":{"done":-1}}`,
		"negative rows":   `{"worker_id":"bad-rep","pending_rows":-99}`,
		"too many breaks": string(tooManyJSON),
	} {
		var we *lease.WireError
		if err := w.reportRaw([]byte(data)); !errors.As(err, &we) || we.Code != lease.CodeBadRequest {
			t.Errorf("%s: %v; want bad_request", name, err)
		}
	}
	if mv := memberOf(t, leader, w.id); mv.Report == nil || mv.Report.Report == nil || mv.Report.PendingRows != 3 {
		t.Errorf("after bad reports: %+v; want the good one kept", mv.Report)
	}

	// ring.report is a request-response.
	w.mu.Lock()
	client := w.client
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := client.RequestStream(payload.New([]byte(`{"worker_id":"bad-rep"}`), composite(lease.RouteReport))).BlockLast(ctx)
	var we *lease.WireError
	if !errors.As(asWire(err), &we) || we.Code != lease.CodeBadRequest {
		t.Errorf("ring.report as a stream: %v; want bad_request", err)
	}

	// A connection that never subscribed is no member: acked, not kept.
	stranger := connectedOnly(t, "stranger", leader.RSocketAddr())
	if err := stranger.report(lease.Report{PendingRows: 1}); err != nil {
		t.Fatalf("a non-member's report: %v; want an ack", err)
	}
	term := leader.currentTerm()
	term.reports.mu.Lock()
	kept := len(term.reports.byMember)
	term.reports.mu.Unlock()
	if kept != 1 {
		t.Errorf("%d members with reports; want only the member's", kept)
	}
}
