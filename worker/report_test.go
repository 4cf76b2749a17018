package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// logLines collects a logger's JSON lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// with returns the decoded lines whose message contains msg.
func (l *logLines) with(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if s, _ := m["message"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

// TestLeaseFitNamesFiguresAndFlags: the fit is judged from the element's ttl and renewal, and
// the reason names both figures and the flags to change.
func TestLeaseFitNamesFiguresAndFlags(t *testing.T) {
	margin := 100 * time.Millisecond
	l := func(ttl, renewal time.Duration) lease.Lease { return lease.Lease{TTL: ttl, Renewal: renewal} }
	for _, tc := range []struct {
		name        string
		query, exec time.Duration
		lease       lease.Lease
		want        string
	}{
		{"product.md's timing", time.Second, 5 * time.Second, l(10*time.Second, 2*time.Second), ""},
		{"exact fit", time.Second, 5*time.Second - margin, l(9*time.Second, 2*time.Second), ""},
		{"no renewal said", time.Second, 5 * time.Second, l(3*time.Second, 0), ""},
		{"execution only", 500 * time.Millisecond, 5 * time.Second, l(3*time.Second, time.Second),
			"--exec-timeout 5s + 100ms margin does not fit in the 1s a lease holds at least (ttl 3s − 2 × renewal 1s): " +
				"lower --exec-timeout or raise the coordinators' --lease-ttl"},
		{"both", time.Second, 5 * time.Second, l(3*time.Second, time.Second),
			"--exec-timeout 5s and --query-timeout 1s, each + 100ms margin, do not fit in the 1s a lease holds at least " +
				"(ttl 3s − 2 × renewal 1s): lower --exec-timeout and --query-timeout or raise the coordinators' --lease-ttl"},
		{"renewal past half the TTL", time.Millisecond, time.Millisecond, l(3*time.Second, 2*time.Second),
			"--exec-timeout 1ms and --query-timeout 1ms, each + 100ms margin, do not fit in the 0s a lease holds at least " +
				"(ttl 3s − 2 × renewal 2s): lower --exec-timeout and --query-timeout or raise the coordinators' --lease-ttl"},
	} {
		if got := leaseFit(tc.query, tc.exec, margin, tc.lease); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestLeaseFitLogsOncePerChange: asked on every cycle, scrape and /readyz, the worker logs the
// misfit once per set of figures, and once when they fit again.
func TestLeaseFitLogsOncePerChange(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	logs := &logLines{}
	sc := unitScanner(t, Config{Clock: clock, Logger: zerolog.New(logs)}, g)
	set := func(ttl, renewal time.Duration) {
		g.Set(lease.Lease{Epoch: 1, TTL: ttl, Renewal: renewal, ValidFrom: clock.Now()})
	}
	if why := sc.LeaseFit(); why != "" {
		t.Fatalf("no lease: %q", why)
	}
	set(3*time.Second, time.Second)
	for i := 0; i < 5; i++ {
		if sc.LeaseFit() == "" {
			t.Fatal("1 s query and 5 s execution timeouts fit a 3 s lease renewed every second")
		}
	}
	set(4*time.Second, time.Second) // other figures, still no fit
	sc.LeaseFit()
	errs := logs.with(t, "do not fit its lease")
	if len(errs) != 2 || errs[0]["level"] != "error" || !strings.Contains(errs[0]["reason"].(string), "ttl 3s") ||
		!strings.Contains(errs[1]["reason"].(string), "ttl 4s") {
		t.Fatalf("misfit lines %v; want one error per set of figures", errs)
	}
	set(10*time.Second, 2*time.Second)
	sc.LeaseFit()
	sc.LeaseFit()
	if again := logs.with(t, "fit its lease again"); len(again) != 1 {
		t.Fatalf("%d lines saying the timeouts fit again, want 1", len(again))
	}
}

// TestGuardRefusalsAreLoggedReadably: a storm of refusals gives one line at once and then one
// line per 10 s with the count by reason since the last, never one per refusal.
func TestGuardRefusalsAreLoggedReadably(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	logs := &logLines{}
	sc := unitScanner(t, Config{Clock: clock, Logger: zerolog.New(logs)}, lease.NewGuard(clock, 0))
	expired := errors.Join(lease.ErrLeaseExpired)
	moved := errors.Join(lease.ErrTokenNotLeased)
	_ = sc.refused(expired)
	for i := 0; i < 900; i++ { // 9 s of refusals
		clock.Advance(10 * time.Millisecond)
		_ = sc.refused(expired)
		if i%3 == 0 {
			_ = sc.refused(moved)
		}
	}
	_ = sc.refused(lease.ErrNotNode0) // not being Node-0 is no refusal
	lines := logs.with(t, "lease guard refused")
	if len(lines) != 1 || lines[0]["refused"] != float64(1) {
		t.Fatalf("after 9 s of refusals: lines %v; want the first one only", lines)
	}
	clock.Advance(time.Second)
	sc.refusals.flush(sc, clock.Now()) // the end of a cycle: the line is due
	lines = logs.with(t, "lease guard refused")
	if len(lines) != 2 {
		t.Fatalf("after 10 s: %d lines, want 2", len(lines))
	}
	by := lines[1]["by_reason"].(map[string]any)
	if lines[1]["refused"] != float64(1200) || by["expired"] != float64(900) || by["token_not_leased"] != float64(300) || lines[1]["level"] != "warn" {
		t.Fatalf("second line %v; want 1200 refusals since the first, by reason", lines[1])
	}
	if st := sc.Stats(); st.GuardRefusals != 1201 {
		t.Errorf("%d refusals counted, want 1201", st.GuardRefusals)
	}
	sc.refusals.flush(sc, clock.Now().Add(time.Hour))
	if n := len(logs.with(t, "lease guard refused")); n != 2 {
		t.Errorf("a line without refusals since the last: %d lines", n)
	}
}

// TestKeptBucketSaysWhy: the reasons a bucket's rows were left, commonest first, and when they
// are worth a line at info.
func TestKeptBucketSaysWhy(t *testing.T) {
	run := &bucketRun{}
	for i := 0; i < 3; i++ {
		run.hold(errBreakerOpen)
	}
	run.hold(errImplPaused)
	run.hold(lease.ErrLeaseExpired)
	run.hold(errors.New("gocql: no response received from cassandra within timeout period"))
	run.hold(errElsewhere)
	if got, want := run.why(), "breaker open ×3, failed query ×1, guard refusal ×1, impl paused ×1, in progress elsewhere ×1"; got != want {
		t.Errorf("why = %q, want %q", got, want)
	}

	// A bucket kept pass after pass for the same reasons is said once; new reasons, or the same
	// bucket after it was deleted and written again, are said again.
	var kl keptLog
	key := cassandra.BucketKey{InstanceID: "pod-a"}
	for i, want := range []bool{true, false, false} {
		if got := kl.changed(key, run.reasons()); got != want {
			t.Errorf("pass %d: changed %v, want %v", i, got, want)
		}
	}
	run.hold(errBreakerOpen) // another count, the same reasons
	if kl.changed(key, run.reasons()) {
		t.Error("a count that changed was taken for new reasons")
	}
	run.hold(errNotSent)
	if !kl.changed(key, run.reasons()) {
		t.Error("a new reason was not said")
	}
	kl.forget(key)
	if !kl.changed(key, run.reasons()) {
		t.Error("a bucket deleted and kept again was not said")
	}
}

// TestReportSaysWhatTheWorkerSaw: the report carries the counters, the breakers that are not
// closed, the backlog of the last complete pass, Node-0's view of the directory only while it is
// Node-0, and the lease fit.
func TestReportSaysWhatTheWorkerSaw(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	g.Set(lease.Lease{Epoch: 1, NodeIndex: 0, NodeCount: 1, TTL: 10 * time.Second, Renewal: 2 * time.Second, ValidFrom: clock.Now()})
	sc := unitScanner(t, Config{Clock: clock}, g)
	sc.stats.Done, sc.stats.Transient, sc.stats.NotSent, sc.stats.DeadLettered, sc.stats.GuardRefusals = 5, 4, 1, 2, 9
	for i := 0; i < breakerMinCalls; i++ {
		tk, _ := sc.breakers.admit("Payment", clock.Now())
		sc.breakers.settle(tk, true, clock.Now())
	}
	sc.breakers.admit("Ship", clock.Now())
	p := &pass{}
	w1, w2 := clock.Now().Add(-time.Hour), clock.Now().Add(-2*time.Hour)
	p.unfinished(w1, 7)
	p.unfinished(w2, 3)
	dir := directoryPass{node0: true}
	dir.left(w1)
	dir.left(clock.Now().Add(-24 * time.Hour))
	sc.backlog.publish(p, dir)

	r := sc.Report()
	if r.Executions["done"] != 5 || r.Executions["transient"] != 4 || r.Executions["permanent"] != 0 || r.Executions["not_sent"] != 1 ||
		r.DeadLettered != 2 || r.GuardRefusals != 9 || r.LeaseFit != "" {
		t.Errorf("report counters %+v", r)
	}
	if len(r.Breakers) != 1 || r.Breakers[0] != (lease.BreakerReport{Impl: "Payment", State: "open", OpenUntilMs: clock.Now().Add(breakerCoolOff).UnixMilli()}) {
		t.Errorf("breakers %+v; want Payment's, open for the cool-off", r.Breakers)
	}
	if r.OldestWindowStartMs != w2.UnixMilli() || r.PendingRows != 10 || r.DirectoryOldestWindowStartMs != clock.Now().Add(-24*time.Hour).UnixMilli() {
		t.Errorf("backlog %d, %d rows, directory %d", r.OldestWindowStartMs, r.PendingRows, r.DirectoryOldestWindowStartMs)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("the coordinator would refuse the report: %v", err)
	}

	g.Set(lease.Lease{Epoch: 2, NodeIndex: 1, NodeCount: 2, TTL: 3 * time.Second, Renewal: time.Second, ValidFrom: clock.Now()})
	clock.Advance(breakerCoolOff)
	r = sc.Report()
	if r.DirectoryOldestWindowStartMs != 0 || r.LeaseFit == "" || len(r.Breakers) != 1 || r.Breakers[0].State != "half_open" {
		t.Errorf("no longer Node-0, a short lease, the cool-off over: %+v", r)
	}
	sc.backlog.publish(&pass{}, directoryPass{})
	if r = sc.Report(); r.OldestWindowStartMs != 0 || r.PendingRows != 0 {
		t.Errorf("a pass that finished everything: %+v", r)
	}
}
