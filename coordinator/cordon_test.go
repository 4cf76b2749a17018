package coordinator

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func workerPath(id, action string) string {
	return admin.PathWorkers + url.PathEscape(id) + "/" + action
}

// A cordoned worker stays connected with no range and is not Node-0 (Node-0 moves off it); the
// other worker takes the whole ring only by the safe path (after the release); on uncordon the
// cordoned worker gets its share back. The calls go through a follower; no token is ever usable
// by both workers at once.
func TestCordonedWorkerStaysConnectedWithNoRanges(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	addrs := c.rsocketAddrs()
	a, b := startSplitPair(t, addrs)

	streamErr := a.lastStreamErr() // a first stream may have ended on a follower's not_leader
	var got admin.CordonAnswer
	status, body := post(t, follower.HTTPAddr(), workerPath("a", admin.ActionCordon), ``, &got)
	if status != http.StatusOK || !got.Cordoned || got.Ring != testRing || got.WorkerID != "a" || got.LeaderID != leader.cfg.NodeID {
		t.Fatalf("cordon a through %s: %d %s", follower.cfg.NodeID, status, body)
	}
	eventually(t, 10*time.Second, "b holds the whole ring as Node-0, a nothing", func() bool {
		g, ok := a.latest()
		return ok && g.lease.Ranges.Empty() && g.lease.NodeIndex != 0 && b.holds(lease.Ranges{lease.FullRing}, 0, 2)
	})
	if err := a.lastStreamErr(); err != streamErr {
		t.Fatalf("the cordoned worker's stream ended: %v", err)
	}
	// a keeps being renewed: it is still a member, connected, with no range.
	before := len(a.history())
	eventually(t, 10*time.Second, "a renewed while cordoned", func() bool { return len(a.history()) > before+1 })
	for _, n := range c.nodes {
		eventually(t, 5*time.Second, n.cfg.NodeID+" shows a cordoned", func() bool {
			r, ok := n.View().Ring(testRing)
			if !ok {
				return false
			}
			for _, m := range r.Members {
				if m.WorkerID == "a" {
					return m.Cordoned && m.State == admin.MemberActive
				}
			}
			return false
		})
	}
	// The ring page shows it as cordoned.
	resp, err := http.Get("http://" + follower.HTTPAddr() + admin.PathPage)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `<tr class="active cordoned">`) || !strings.Contains(string(page), "<td>cordoned</td>") {
		t.Errorf("the ring page does not show a as cordoned:\n%s", page)
	}
	// Cordoning again changes nothing and answers the same.
	if status, body := post(t, leader.HTTPAddr(), workerPath("a", admin.ActionCordon), `{"ring":{"region":"eu","cluster":"c1","service":"orders"}}`, &got); status != http.StatusOK || !got.Cordoned {
		t.Fatalf("second cordon: %d %s", status, body)
	}

	status, body = post(t, follower.HTTPAddr(), workerPath("a", admin.ActionUncordon), `{}`, &got)
	if status != http.StatusOK || got.Cordoned {
		t.Fatalf("uncordon a: %d %s", status, body)
	}
	eventually(t, 10*time.Second, "a and b split the ring again", func() bool {
		ga, oka := a.latest()
		gb, okb := b.latest()
		return oka && okb && ga.lease.NodeCount == 2 && gb.lease.NodeCount == 2 &&
			ga.lease.Ranges.Union(gb.lease.Ranges).Equal(lease.Ranges{lease.FullRing}) &&
			!ga.lease.Ranges.Empty() && !gb.lease.Ranges.Empty() && (ga.lease.IsNode0() != gb.lease.IsNode0())
	})
	checkExclusive(t, a, b)
}

// Unknown workers are 404 unknown_worker from any node; a worker in several rings needs its ring
// named; a bad path or body is 404 or 400; nothing is committed.
func TestCordonRefusals(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	addrs := c.rsocketAddrs()
	a := newTestWorker(t, "a", addrs...).start()
	other := newTestWorker(t, "a", addrs...)
	other.ring, other.inc = lease.RingKey{Region: "eu", Cluster: "c1", Service: "billing"}, "a-inc2"
	other.start()
	eventually(t, 10*time.Second, "a holds both rings", func() bool {
		return a.holds(lease.Ranges{lease.FullRing}, 0, 1) && other.holds(lease.Ranges{lease.FullRing}, 0, 1)
	})
	eventually(t, 5*time.Second, follower.cfg.NodeID+" knows both rings", func() bool { return len(follower.View().Rings) == 2 })
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"unknown worker", workerPath("nobody", admin.ActionCordon), ``, http.StatusNotFound, "unknown_worker"},
		{"unknown in the named ring", workerPath("nobody", admin.ActionUncordon), `{"ring":{"region":"eu","cluster":"c1","service":"orders"}}`, http.StatusNotFound, "unknown_worker"},
		{"in two rings", workerPath("a", admin.ActionCordon), ``, http.StatusBadRequest, "eu/c1/billing, eu/c1/orders"},
		{"bad body", workerPath("a", admin.ActionCordon), `{"rings":1}`, http.StatusBadRequest, "unknown field"},
		{"incomplete ring", workerPath("a", admin.ActionCordon), `{"ring":{"region":"eu"}}`, http.StatusBadRequest, "region, cluster and service"},
		{"no action", admin.PathWorkers + "a/drain", ``, http.StatusNotFound, "no action"},
		{"no worker id", admin.PathWorkers + "/cordon", ``, http.StatusNotFound, "want POST"},
	} {
		for _, n := range []*Node{leader, follower} {
			status, body := post(t, n.HTTPAddr(), tc.path, tc.body, nil)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%s on %s: %d %s, want %d with %q", tc.name, n.cfg.NodeID, status, body, tc.status, tc.want)
			}
		}
	}
	if r, _ := leader.View().Ring(testRing); len(r.Members) != 1 || r.Members[0].Cordoned {
		t.Fatalf("a refused call changed the ring: %+v", r.Members)
	}
}
