package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// fakeCluster is a coordinator's Raft configuration and peers as status and peers see them,
// written by hand: answers by admin address, an error for an address that does not answer.
type fakeCluster struct {
	self     NodeStatus
	leaderID string
	servers  []RaftServerView
	addrs    map[string]string // node id -> admin address
	behind   string
	answers  map[string]PeerAnswer // admin address -> answer

	mu    sync.Mutex // peers are asked in parallel
	asked []string   // paths asked
}

func (f *fakeCluster) Status() NodeStatus { return f.self }
func (f *fakeCluster) Servers() (string, []RaftServerView, error) {
	if f.servers == nil {
		return "", nil, fmt.Errorf("%w: raft not started", lease.ErrUnavailable)
	}
	return f.leaderID, f.servers, nil
}
func (f *fakeCluster) PeerHTTPAddr(id string) string { return f.addrs[id] }
func (f *fakeCluster) Behind() string                { return f.behind }
func (f *fakeCluster) AskPeer(_ context.Context, addr, path string) (PeerAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, path)
	a, ok := f.answers[addr]
	if !ok {
		return PeerAnswer{}, errors.New("connection refused")
	}
	return a, nil
}

func clusterServer(f *fakeCluster) *Server {
	s := New(&fakeNode{view: RingView{CoordinatorID: f.self.ID}}, zerolog.Nop())
	s.ServeCluster(f)
	return s
}

func statusOf(t *testing.T, id, state string) PeerAnswer {
	t.Helper()
	b, err := json.Marshal(NodeStatus{ID: id, State: state})
	if err != nil {
		t.Fatal(err)
	}
	return PeerAnswer{StatusCode: http.StatusOK, Status: "200 OK", Body: b}
}

// TestStatusAsksTheLeader: GET /v1/status describes the node and asks the leader for its own
// status (?local=1); ?local=1 answers the node alone; a leader whose address is unknown, one that
// answers an error and none at all are said in LeaderError.
func TestStatusAsksTheLeader(t *testing.T) {
	f := &fakeCluster{
		self:    NodeStatus{ID: "c2", State: "follower", LeaderID: "c1"},
		addrs:   map[string]string{"c1": "h1:1"},
		answers: map[string]PeerAnswer{},
	}
	f.answers["h1:1"] = statusOf(t, "c1", "leader")
	s := clusterServer(f)
	var ans StatusAnswer
	rec := call(s, http.MethodGet, PathStatus)
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != http.StatusOK || ans.Node.ID != "c2" ||
		ans.Leader == nil || ans.Leader.ID != "c1" || ans.LeaderError != "" {
		t.Fatalf("status: %d %s", rec.Code, rec.Body)
	}
	if len(f.asked) != 1 || f.asked[0] != PathStatus+"?local=1" {
		t.Fatalf("asked the leader %v", f.asked)
	}
	var local NodeStatus
	rec = call(s, http.MethodGet, PathStatus+"?local=1")
	if err := json.Unmarshal(rec.Body.Bytes(), &local); err != nil || local.ID != "c2" || len(f.asked) != 1 {
		t.Fatalf("local status: %s, asked %v", rec.Body, f.asked)
	}

	for _, tc := range []struct {
		name     string
		leaderID string
		addrs    map[string]string
		answer   *PeerAnswer
		want     string
	}{
		{"no leader", "", nil, nil, "no leader known (an election is under way, or quorum is lost)"},
		{"unregistered", "c1", nil, nil, "leader c1 has not registered its admin address (it registers once it runs, is in the raft configuration and reaches the leader)"},
		{"unreachable", "c1", map[string]string{"c1": "h9:1"}, nil, "leader c1 at h9:1: connection refused"},
		{"refused", "c1", map[string]string{"c1": "h1:1"}, &PeerAnswer{StatusCode: 503, Status: "503 Service Unavailable", Body: []byte("{\"error\":\"x\"}\n")},
			`leader c1 at h1:1: answered 503 Service Unavailable: {"error":"x"}`},
		{"not a status", "c1", map[string]string{"c1": "h1:1"}, &PeerAnswer{StatusCode: 200, Status: "200 OK", Body: []byte("<html>")},
			"leader c1 at h1:1: answered something that is not a node status: invalid character '<' looking for beginning of value"},
	} {
		f.self.LeaderID, f.addrs = tc.leaderID, tc.addrs
		if tc.answer != nil {
			f.answers["h1:1"] = *tc.answer
		}
		ans = StatusAnswer{}
		rec := call(s, http.MethodGet, PathStatus)
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != http.StatusOK || ans.Leader != nil || ans.LeaderError != tc.want {
			t.Errorf("%s: %d %s, want leader_error %q", tc.name, rec.Code, rec.Body, tc.want)
		}
	}
}

// TestPeersSayWhyAStatusIsMissing: GET /v1/peers lists the configuration in its order, this node
// with its own status, a peer that answers with its status, and why the others have none: not
// reachable, not registered, or not known yet because this node is behind its log (it says that
// of itself rather than blame every peer). Without Raft it is a 503.
func TestPeersSayWhyAStatusIsMissing(t *testing.T) {
	f := &fakeCluster{
		self:     NodeStatus{ID: "c1", State: "leader"},
		leaderID: "c1",
		servers:  []RaftServerView{{ID: "c1", RaftAddr: "r1", Voter: true}, {ID: "c2", RaftAddr: "r2", Voter: true}, {ID: "c3", RaftAddr: "r3"}, {ID: "c4", RaftAddr: "r4", Voter: true}},
		addrs:    map[string]string{"c2": "h2:1", "c3": "h3:1"},
		answers:  map[string]PeerAnswer{},
	}
	f.answers["h2:1"] = statusOf(t, "c2", "follower")
	s := clusterServer(f)
	var ans PeersAnswer
	rec := call(s, http.MethodGet, PathPeers)
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || rec.Code != http.StatusOK || ans.CoordinatorID != "c1" || ans.LeaderID != "c1" || len(ans.Peers) != 4 {
		t.Fatalf("peers: %d %s", rec.Code, rec.Body)
	}
	p := ans.Peers
	if p[0].Status == nil || p[0].Status.State != "leader" || p[1].Status == nil || p[1].Status.ID != "c2" || p[1].Problem != "" ||
		p[2].Voter || p[2].Problem != PeerUnreachable || p[2].Error != "unreachable at h3:1: connection refused" ||
		p[3].Problem != PeerUnregistered || !strings.HasPrefix(p[3].Error, "has not registered its admin address") {
		t.Fatalf("peers: %s", rec.Body)
	}

	f.behind = "no contact with a leader yet"
	ans = PeersAnswer{}
	rec = call(s, http.MethodGet, PathPeers)
	_ = json.Unmarshal(rec.Body.Bytes(), &ans)
	want := "not known yet: c1 (asked) has not applied its log since it started (no contact with a leader yet), so it does not know c4's admin address yet; ask again in a moment"
	if len(ans.Peers) != 4 || ans.Peers[3].Problem != PeerUnknown || ans.Peers[3].Error != want {
		t.Fatalf("peers while behind: %s, want c4 %q", rec.Body, want)
	}

	f.servers = nil
	rec = call(s, http.MethodGet, PathPeers)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"message":"raft not started"`) {
		t.Fatalf("peers without raft: %d %s", rec.Code, rec.Body)
	}
}
