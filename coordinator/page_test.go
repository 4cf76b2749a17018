package coordinator

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// TestRingPageAndMetrics: a real cluster with a worker serves the ring page (HTML naming the
// coordinators, the ring and its member) and Prometheus metrics that say who leads and how many
// members the ring has; a bad refresh is refused with a JSON error.
func TestRingPageAndMetrics(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	w := newTestWorker(t, "page-worker", c.rsocketAddrs()...).start()
	eventually(t, 10*time.Second, "the worker holds the ring", func() bool {
		return w.holds(lease.Ranges{lease.FullRing}, 0, 1)
	})

	get := func(addr, path string) (int, string, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	status, ctype, body := get(leader.HTTPAddr(), "/")
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("GET /: %d %s", status, ctype)
	}
	if strings.Contains(body, "ZgotmplZ") {
		t.Errorf("html/template refused a value of the page (ZgotmplZ):\n%s", body)
	}
	for _, want := range []string{leader.cfg.NodeID, "page-worker", "(Node-0)", "100.0%", `http-equiv="refresh" content="2"`} {
		if !strings.Contains(body, want) {
			t.Errorf("ring page lacks %q", want)
		}
	}
	for _, n := range c.followers(leader) {
		if !strings.Contains(body, n.cfg.NodeID) {
			t.Errorf("ring page lacks follower %s", n.cfg.NodeID)
		}
	}
	if _, _, body := get(leader.HTTPAddr(), "/?refresh=0"); strings.Contains(body, "http-equiv") {
		t.Error("refresh=0 still refreshes")
	}
	if status, ctype, _ := get(leader.HTTPAddr(), "/?refresh=soon"); status != http.StatusBadRequest || ctype != "application/json" {
		t.Errorf("bad refresh: %d %s, want 400 JSON", status, ctype)
	}

	eventually(t, 5*time.Second, "metrics of the leader", func() bool {
		_, _, m := get(leader.HTTPAddr(), "/metrics")
		return strings.Contains(m, "retryring_coordinator_is_leader 1") &&
			strings.Contains(m, `retryring_coordinator_raft_state{state="Leader"} 1`) &&
			strings.Contains(m, "retryring_coordinator_ring_assigned_ratio{") &&
			metricValue(m, `retryring_coordinator_lease_elements_sent_total`) > 0 &&
			strings.Contains(m, `state="active"} 1`)
	})
	_, _, m := get(c.followers(leader)[0].HTTPAddr(), "/metrics")
	if !strings.Contains(m, "retryring_coordinator_is_leader 0") || !strings.Contains(m, "retryring_coordinator_leader_known 1") {
		t.Errorf("follower metrics:\n%s", m)
	}
}

// metricValue reads the value of an unlabelled series from Prometheus text; -1 when absent.
func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}
