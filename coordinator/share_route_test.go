package coordinator

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// rateOf is the rate_per_s of w's latest element; -1 when it has none.
func rateOf(w *testWorker) float64 {
	g, ok := w.latest()
	if !ok || g.lease.Controls == nil || g.lease.Controls.RatePerS == nil {
		return -1
	}
	return *g.lease.Controls.RatePerS
}

// rates is the rate_per_s of each worker's latest element, for messages.
func rates(ws ...*testWorker) string {
	s := ""
	for _, w := range ws {
		s += fmt.Sprintf(" %s=%v", w.id, rateOf(w))
	}
	return s
}

// reportTwice sends r twice, the period of the cluster apart: the leader reads a member as idle
// only on two reports half a period apart at least.
func reportTwice(t *testing.T, w *testWorker, r lease.Report) {
	t.Helper()
	for i := range 2 {
		if i > 0 {
			time.Sleep(testReportPeriod)
		}
		if err := w.report(r); err != nil {
			t.Fatalf("%s: report: %v", w.id, err)
		}
	}
}

// TestShareMovesToTheMemberWithWork: three coordinators, three workers on real RSocket connections
// that announce the controls, a limit of 60/s. Without reports each gets 20/s. Once two of them
// report nothing pending, the third gets all 60/s and they get 0; when one of them reports rows
// pending again, the two with work get 30/s each. The renewal is far longer than the test: every
// share change reaches the workers through the streams woken by the report (no commit happens
// between them), never through a renewal tick.
func TestShareMovesToTheMemberWithWork(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *Config) {
		withReportPeriod(i, cfg)
		cfg.Timing = lease.Timing{TTL: 4 * time.Minute, Renewal: 2 * time.Minute, Margin: 100 * time.Millisecond}
	})
	leader := c.leader()
	var ws []*testWorker
	for i := 1; i <= 3; i++ {
		w := newTestWorker(t, fmt.Sprintf("share-%d", i), c.rsocketAddrs()...)
		w.features = []string{lease.FeatureControls}
		ws = append(ws, w.start())
	}
	big, small1, small2 := ws[0], ws[1], ws[2]
	eventually(t, 20*time.Second, "each worker holds a third of the ring", func() bool {
		var all lease.Ranges
		for _, w := range ws {
			g, ok := w.latest()
			if !ok || g.lease.NodeCount != 3 {
				return false
			}
			all = all.Union(g.lease.Ranges)
		}
		return all.Equal(lease.Ranges{lease.FullRing})
	})
	if status, body := post(t, leader.HTTPAddr(), ringPath(testRing, admin.ActionLimit), `{"per_second":60}`, nil); status != http.StatusOK {
		t.Fatalf("limit: %d %s", status, body)
	}
	split := func(what string, want ...float64) {
		t.Helper()
		eventually(t, 10*time.Second, what, func() bool {
			for i, w := range ws {
				if !near(rateOf(w), want[i]) {
					return false
				}
			}
			return true
		})
		t.Logf("%s:%s", what, rates(ws...))
	}
	split("no reports: by tokens", 20, 20, 20)

	idle := lease.Report{Executions: execs(40, 0)}
	if err := big.report(lease.Report{Executions: execs(40, 0), PendingRows: 5000, OldestWindowStartMs: 1_700_000_000_000}); err != nil {
		t.Fatal(err)
	}
	reportTwice(t, small1, idle)
	split("one small member idle", 30, 0, 30)
	reportTwice(t, small2, idle)
	split("both small members idle: the big one gets the limit", 60, 0, 0)

	if err := small2.report(lease.Report{Executions: execs(40, 0), PendingRows: 12}); err != nil {
		t.Fatal(err)
	}
	split("a small member has work again", 30, 0, 30)
	if err := big.report(idle); err != nil {
		t.Fatal(err)
	}
	time.Sleep(testReportPeriod)
	if err := big.report(idle); err != nil {
		t.Fatal(err)
	}
	split("only the second small member has work", 0, 0, 60)
	if err := small2.report(idle); err != nil {
		t.Fatal(err)
	}
	split("none with work: by tokens", 20, 20, 20)
}
