package coordinator

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// GET /v1/status on a follower describes the follower and, asked of it, the leader; ?local=1 only
// the node asked. GET /v1/peers describes every server of the configuration as it sees itself.
func TestStatusAndPeers(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	a := newTestWorker(t, "a", c.rsocketAddrs()...).start()
	eventually(t, 10*time.Second, "a holds the ring", func() bool { return a.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	eventually(t, 5*time.Second, follower.cfg.NodeID+" applied a's join", func() bool { return len(follower.View().Rings) == 1 })

	var st admin.StatusAnswer
	if code := getJSON(t, follower.HTTPAddr(), admin.PathStatus, &st); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	if st.Node.ID != follower.cfg.NodeID || st.Node.State != "follower" || st.Node.LeaderID != leader.cfg.NodeID ||
		st.Node.HTTPAddr != follower.HTTPAddr() || st.Node.FSMVersion != fsm.Version || st.Node.Rings != 1 || st.Node.Members != 1 ||
		st.Node.Term == 0 || st.Node.CommitIndex == 0 {
		t.Fatalf("follower's own status: %+v", st.Node)
	}
	if st.Leader == nil || st.Leader.ID != leader.cfg.NodeID || st.Leader.State != "leader" || !st.Leader.Ready || st.Leader.LastContact != "0" {
		t.Fatalf("leader's status through %s: %+v (%s)", follower.cfg.NodeID, st.Leader, st.LeaderError)
	}
	var local admin.NodeStatus
	getJSON(t, leader.HTTPAddr(), admin.PathStatus+"?local=1", &local)
	if local.ID != leader.cfg.NodeID || local.State != "leader" {
		t.Fatalf("local status of the leader: %+v", local)
	}

	var peers admin.PeersAnswer
	if code := getJSON(t, follower.HTTPAddr(), admin.PathPeers, &peers); code != http.StatusOK || len(peers.Peers) != 3 {
		t.Fatalf("peers: %d %+v", code, peers)
	}
	leaders := 0
	for _, p := range peers.Peers {
		if p.Status == nil || p.Error != "" || !p.Voter || p.Status.ID != p.ID || p.Status.RaftAddr != p.RaftAddr {
			t.Fatalf("peer %s: %+v %+v", p.ID, p, p.Status)
		}
		if p.Status.State == "leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders among the peers: %+v", leaders, peers)
	}

	// A dead peer is shown as unreachable, the others as they are.
	other := c.followers(leader)[1]
	other.Kill()
	getJSON(t, follower.HTTPAddr(), admin.PathPeers, &peers)
	for _, p := range peers.Peers {
		if (p.ID == other.cfg.NodeID) != (p.Status == nil) || (p.ID == other.cfg.NodeID && !strings.Contains(p.Error, "unreachable")) {
			t.Fatalf("peer %s after %s died: error %q status %+v", p.ID, other.cfg.NodeID, p.Error, p.Status)
		}
	}
}

// ctl step-down through a follower: the follower forwards it, the leader hands over to the named
// voter, and the worker's lease carries on with its epoch (a handover is a failover without the
// wait for an election timeout). Naming no voter, or the leader itself, is a 400.
func TestStepDownThroughAFollower(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	followers := c.followers(leader)
	a := newTestWorker(t, "a", c.rsocketAddrs()...).start()
	eventually(t, 10*time.Second, "a holds the ring", func() bool { return a.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	before, _ := a.latest()

	for _, tc := range []struct{ body, want string }{
		{`{"to":"c9"}`, "not a voter"},
		{`{"to":"` + leader.cfg.NodeID + `"}`, "already leads"},
		{`{"too":"c2"}`, "unknown field"},
	} {
		status, body := post(t, followers[0].HTTPAddr(), admin.PathStepDown, tc.body, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("step-down %s: %d %s, want 400 with %q", tc.body, status, body, tc.want)
		}
	}

	target := followers[1]
	var got admin.StepDownAnswer
	status, body := post(t, followers[0].HTTPAddr(), admin.PathStepDown, `{"to":"`+target.cfg.NodeID+`"}`, &got)
	if status != http.StatusOK || got.PreviousLeader != leader.cfg.NodeID || got.LeaderID != target.cfg.NodeID {
		t.Fatalf("step-down to %s: %d %s", target.cfg.NodeID, status, body)
	}
	if next := c.leader(); next != target {
		t.Fatalf("leader after the step-down: %s, want %s", next.cfg.NodeID, target.cfg.NodeID)
	}
	eventually(t, 10*time.Second, "a renewed by the new leader", func() bool {
		g, ok := a.latest()
		return ok && g.via == target.RSocketAddr()
	})
	after, _ := a.latest()
	if after.lease.Epoch != before.lease.Epoch || !after.lease.Ranges.Equal(before.lease.Ranges) {
		t.Fatalf("the handover changed a's assignment: epoch %d %v, then %d %v", before.lease.Epoch, before.lease.Ranges, after.lease.Epoch, after.lease.Ranges)
	}

	// Without --to, Raft picks the voter.
	status, body = post(t, target.HTTPAddr(), admin.PathStepDown, ``, &got)
	if status != http.StatusOK || got.PreviousLeader != target.cfg.NodeID || got.LeaderID == "" || got.LeaderID == target.cfg.NodeID {
		t.Fatalf("step-down without a target: %d %s", status, body)
	}
}
