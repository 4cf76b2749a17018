package coordinator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// post sends an admin call and decodes the answer into out (when not nil); it returns the status
// and the raw body.
func post(t testing.TB, addr, path, body string, out any) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s%s: decode %q: %v", addr, path, b, err)
		}
	}
	return resp.StatusCode, string(b)
}

func ringPath(k lease.RingKey, action string) string {
	return admin.PathRings + k.Region + "/" + k.Cluster + "/" + k.Service + "/" + action
}

// ringCommand is the command the body of a ring call becomes: package admin reads the body into
// its change, the coordinator builds the command and checks it.
func ringCommand(ring lease.RingKey, action string, body []byte, atMs int64) (fsm.Command, error) {
	change, err := admin.ReadRingChange(ring, action, body)
	if err != nil {
		return nil, err
	}
	cmd, _, err := changeCommand(change, atMs, nil)
	return cmd, err
}

// controlsOn reads the controls of testRing in node n's committed state.
func controlsOn(n *Node) *fsm.Controls {
	var c *fsm.Controls
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if r := s.Ring(testRing); r != nil && r.Controls != nil {
			cc := *r.Controls
			c = &cc
		}
	})
	return c
}

// Every mutation goes to any node: a follower forwards it to the leader itself, and the answer
// is the controls as the leader committed them; every node then shows them in GET /v1/ring.
func TestAdminControlsThroughAFollower(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]

	var got admin.ControlsAnswer
	status, body := post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{"impl":["payment","email"],"reason":"provider down"}`, &got)
	if status != http.StatusOK || got.LeaderID != leader.cfg.NodeID || got.Ring != testRing ||
		got.Controls.Paused || strings.Join(got.Controls.PausedImpl, ",") != "email,payment" ||
		got.Controls.Reason != "provider down" || got.Controls.SinceMs == 0 || got.Controls.RatePerS != nil {
		t.Fatalf("pause through %s: %d %s", follower.cfg.NodeID, status, body)
	}
	status, body = post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{}`, &got)
	if status != http.StatusOK || !got.Controls.Paused {
		t.Fatalf("whole-ring pause: %d %s", status, body)
	}
	status, body = post(t, leader.HTTPAddr(), ringPath(testRing, admin.ActionLimit), `{"per_second":120.5}`, &got)
	if status != http.StatusOK || got.Controls.RatePerS == nil || *got.Controls.RatePerS != 120.5 {
		t.Fatalf("limit: %d %s", status, body)
	}
	status, body = post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionResume), `{"impl":["email"]}`, &got)
	if status != http.StatusOK || !got.Controls.Paused || strings.Join(got.Controls.PausedImpl, ",") != "payment" {
		t.Fatalf("resume of email: %d %s", status, body)
	}
	for _, n := range c.nodes {
		eventually(t, 5*time.Second, n.cfg.NodeID+" shows the controls", func() bool {
			r, ok := n.View().Ring(testRing)
			return ok && r.Controls.Paused && len(r.Controls.PausedImpl) == 1 && r.Controls.RatePerS != nil
		})
	}
	status, body = post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionResume), ``, &got)
	if status != http.StatusOK || got.Controls.Paused || len(got.Controls.PausedImpl) != 0 || got.Controls.Reason != "" {
		t.Fatalf("resume: %d %s", status, body)
	}
	status, body = post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionLimit), `{"clear":true}`, &got)
	if status != http.StatusOK || got.Controls.RatePerS != nil {
		t.Fatalf("clear: %d %s", status, body)
	}
	// Nobody ever joined the ring and nothing is set any more: it is gone again.
	if _, ok := leader.View().Ring(testRing); ok {
		t.Fatalf("a ring nobody joined outlived its controls: %+v", leader.View().Rings)
	}
	// A ring name may hold any character, escaped in the path.
	odd := lease.RingKey{Region: "eu/west", Cluster: "c 1", Service: "orders?"}
	status, body = post(t, follower.HTTPAddr(), admin.PathRings+"eu%2Fwest/c%201/orders%3F/pause", `{}`, &got)
	if status != http.StatusOK || got.Ring != odd {
		t.Fatalf("escaped ring names: %d %s", status, body)
	}
}

// Bad input is answered 400 with a clear message by any node, and nothing is committed; wrong
// methods and paths are 405 and 404.
func TestAdminControlsRefuseBadInput(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	manyImpls, _ := json.Marshal(map[string]any{"impl": strings.Split(strings.Repeat("x,", fsm.MaxPausedImpls)+"y", ",")})
	for _, tc := range []struct {
		name, action, body, want string
	}{
		{"garbage", admin.ActionPause, `{"impl":`, "body"},
		{"not an object", admin.ActionPause, `["payment"]`, "body"},
		{"unknown field", admin.ActionPause, `{"impls":["payment"]}`, "unknown field"},
		{"trailing data", admin.ActionPause, `{} {}`, "after the JSON object"},
		{"too many impls", admin.ActionPause, string(manyImpls), "at most 64"},
		{"empty impl", admin.ActionResume, `{"impl":[""]}`, "impl type"},
		{"long reason", admin.ActionPause, `{"reason":"` + strings.Repeat("r", fsm.MaxReasonBytes+1) + `"}`, "reason"},
		{"zero rate", admin.ActionLimit, `{"per_second":0}`, "above 0"},
		{"negative rate", admin.ActionLimit, `{"per_second":-3}`, "above 0"},
		{"NaN", admin.ActionLimit, `{"per_second":NaN}`, "body"},
		{"huge", admin.ActionLimit, `{"per_second":1e999}`, "body"},
		{"neither", admin.ActionLimit, `{}`, "one of the two"},
		{"both", admin.ActionLimit, `{"per_second":5,"clear":true}`, "one of the two"},
	} {
		for _, n := range []*Node{leader, follower} {
			status, body := post(t, n.HTTPAddr(), ringPath(testRing, tc.action), tc.body, nil)
			var we lease.WireError
			_ = json.Unmarshal([]byte(body), &we)
			if status != http.StatusBadRequest || we.Code != lease.CodeBadRequest || !strings.Contains(we.Message, tc.want) {
				t.Errorf("%s on %s: %d %s, want 400 bad_request mentioning %q", tc.name, n.cfg.NodeID, status, body, tc.want)
			}
		}
	}
	// 64 impl types are fine; one more, in a second call, is not.
	var impls []string
	for i := range fsm.MaxPausedImpls {
		impls = append(impls, strings.Repeat("i", i+1))
	}
	b, _ := json.Marshal(admin.PauseRequest{Impl: impls})
	if status, body := post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionPause), string(b), nil); status != http.StatusOK {
		t.Fatalf("64 impl types: %d %s", status, body)
	}
	before := controlsOn(leader)
	status, body := post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{"impl":["one-more"]}`, nil)
	if status != http.StatusBadRequest || !strings.Contains(body, "at most 64") {
		t.Fatalf("a 65th impl type: %d %s", status, body)
	}
	if after := controlsOn(leader); len(after.PausedImpl) != len(before.PausedImpl) {
		t.Fatalf("a refused pause changed the controls: %+v", after)
	}

	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, ringPath(testRing, admin.ActionPause), http.StatusMethodNotAllowed},
		{http.MethodPost, admin.PathRings + "eu/c1/orders/explode", http.StatusNotFound},
		{http.MethodPost, admin.PathRings + "eu/c1/pause", http.StatusNotFound},
		{http.MethodPost, admin.PathRings + "eu//orders/pause", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+follower.HTTPAddr()+tc.path, bytes.NewReader([]byte(`{}`)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !json.Valid(b) {
			t.Errorf("%s %s: %d %s, want %d with a JSON body", tc.method, tc.path, resp.StatusCode, b, tc.status)
		}
	}
}

// Without a quorum nothing can be committed: any node answers 503, and the state is unchanged.
func TestAdminControlsWithoutAQuorum(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	if status, body := post(t, leader.HTTPAddr(), ringPath(testRing, admin.ActionLimit), `{"per_second":10}`, nil); status != http.StatusOK {
		t.Fatalf("limit: %d %s", status, body)
	}
	followers := c.followers(leader)
	survivor := followers[0]
	eventually(t, 5*time.Second, "the survivor applied the limit", func() bool { return controlsOn(survivor) != nil })
	followers[1].Kill()
	leader.Kill()
	eventually(t, 10*time.Second, "the survivor knows no leader", func() bool { id, _ := survivor.Leader(); return id == "" })
	status, body := post(t, survivor.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{"reason":"no quorum"}`, nil)
	var we lease.WireError
	_ = json.Unmarshal([]byte(body), &we)
	if status != http.StatusServiceUnavailable || (we.Code != lease.CodeNoLeader && we.Code != lease.CodeUnavailable) {
		t.Fatalf("pause without a quorum: %d %s, want 503 no_leader or unavailable", status, body)
	}
	if got := controlsOn(survivor); got == nil || got.Paused || got.RatePerS != 10 {
		t.Fatalf("controls on the survivor: %+v", got)
	}
}
