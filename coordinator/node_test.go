package coordinator

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func TestClusterElectsAndRegistersEveryCoordinator(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]

	var v admin.RingView
	eventually(t, 5*time.Second, "every coordinator registered in a follower's view", func() bool {
		if status := getJSON(t, follower.HTTPAddr(), admin.PathRing, &v); status != http.StatusOK {
			t.Fatalf("GET /v1/ring: %d", status)
		}
		registered := 0
		for _, cv := range v.Coordinators {
			if cv.RSocketAddr != "" && cv.HTTPAddr != "" {
				registered++
			}
		}
		return registered == 3
	})
	if v.CoordinatorID != follower.cfg.NodeID || v.LeaderID != leader.cfg.NodeID || v.RaftTerm == 0 {
		t.Fatalf("view header: %+v", v)
	}
	for _, cv := range v.Coordinators {
		n := c.byID(cv.ID)
		want := admin.CoordinatorFollower
		if n == leader {
			want = admin.CoordinatorLeader
		}
		if cv.State != want || !cv.Voter || cv.RaftAddr != n.RaftAddr() || cv.RSocketAddr != n.RSocketAddr() || cv.HTTPAddr != n.HTTPAddr() {
			t.Errorf("coordinator %s: got %+v", cv.ID, cv)
		}
	}

	if status := getJSON(t, follower.HTTPAddr(), admin.PathHealthz, nil); status != http.StatusOK {
		t.Errorf("healthz: %d", status)
	}
	var rd admin.Readiness
	eventually(t, 5*time.Second, "follower ready", func() bool {
		return getJSON(t, follower.HTTPAddr(), admin.PathReadyz, &rd) == http.StatusOK && rd.Ready
	})
	var e map[string]string
	if status := getJSON(t, follower.HTTPAddr(), "/nope", &e); status != http.StatusNotFound || e["error"] != "not_found" {
		t.Errorf("unknown path: %d %v", status, e)
	}
	resp, err := http.Post("http://"+follower.HTTPAddr()+admin.PathRing, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodGet {
		t.Errorf("POST /v1/ring: %d allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	for _, tc := range []struct {
		addr, body string
		status     int
	}{
		{leader.HTTPAddr(), `{"id":"intruder","rsocket_addr":"x:1","http_addr":"x:2"}`, http.StatusBadRequest},
		{leader.HTTPAddr(), `{"id":`, http.StatusBadRequest},
		{follower.HTTPAddr(), `{"id":"c1","rsocket_addr":"x:1","http_addr":"x:2"}`, http.StatusServiceUnavailable},
	} {
		resp, err := http.Post("http://"+tc.addr+admin.PathRegister, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("register %s at %s: %d, want %d", tc.body, tc.addr, resp.StatusCode, tc.status)
		}
	}
}

func (c *testCluster) byID(id string) *Node {
	for _, n := range c.nodes {
		if n.cfg.NodeID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

func TestFollowerAnswersNotLeaderWithTheLeadersAddress(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]

	w := newTestWorker(t, "w1", follower.RSocketAddr())
	client, err := w.dial(follower.RSocketAddr())
	if err != nil {
		t.Fatalf("a follower must accept the SETUP: %v", err)
	}
	defer client.Close()
	s := &subscriber{w: w, errc: make(chan error, 1)}
	client.RequestStream(leasesPayload(w.id)).SubscribeWith(t.Context(), s)
	var we *lease.WireError
	select {
	case err := <-s.errc:
		if !errors.As(asWire(err), &we) {
			t.Fatalf("want a WireError, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer from the follower")
	}
	if we.Code != lease.CodeNotLeader || we.LeaderID != leader.cfg.NodeID || we.LeaderRSocketAddr != leader.RSocketAddr() {
		t.Fatalf("follower answered %+v, want not_leader %s at %s", we, leader.cfg.NodeID, leader.RSocketAddr())
	}
	if !errors.Is(we, lease.ErrNotLeader) {
		t.Fatal("the wire error must map back to lease.ErrNotLeader")
	}
	err = w.request(client, lease.RouteView, struct{}{}, nil)
	if !errors.As(err, &we) || we.Code != lease.CodeNotLeader {
		t.Fatalf("ring.view on a follower: %v", err)
	}
}
