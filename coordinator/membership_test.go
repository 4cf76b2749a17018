package coordinator

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
)

// startJoiner starts a node told to join through the given admin addresses, on an empty data
// directory unless dir is given.
func startJoiner(t *testing.T, id, dir string, join ...string) *Node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	n, err := New(Config{NodeID: id, DataDir: dir, Join: join, Timing: testTiming, NoSync: true, Logger: testLogger(t),
		RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

// voters lists the voters of n's Raft configuration, sorted.
func voters(t testing.TB, n *Node) []string {
	t.Helper()
	servers, err := n.configuration()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range servers {
		if s.Voter {
			out = append(out, s.ID)
		}
	}
	slices.Sort(out)
	return out
}

// A node started with --join asks a follower, which forwards to the leader: it becomes a voter,
// registers itself, and applies the replicated state; a worker's assignment does not change.
func TestJoinAddsAVoter(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	w := newTestWorker(t, "w1", c.rsocketAddrs()...).start()
	eventually(t, 15*time.Second, "w1 leased", func() bool { _, ok := w.latest(); return ok })
	before, _ := w.latest()

	follower := c.followers(leader)[0]
	c4 := startJoiner(t, "c4", "", follower.HTTPAddr())
	c.nodes = append(c.nodes, c4)
	eventually(t, 15*time.Second, "c4 a voter, registered, caught up", func() bool {
		var floor, floor4 uint64
		leader.fsm.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
		c4.fsm.View(func(s *fsm.State, _ uint64) { floor4 = s.EpochFloor })
		return slices.Equal(voters(t, leader), []string{"c1", "c2", "c3", "c4"}) && registered(leader, "c4") && floor4 == floor && floor > 0
	})
	if g, _ := w.latest(); g.lease.Epoch != before.lease.Epoch {
		t.Fatalf("a coordinator joining changed w1's assignment: epoch %d, then %d", before.lease.Epoch, g.lease.Epoch)
	}
}

// A dead node is replaced: remove-peer through a follower takes it out of the configuration and
// forgets its registration; a new node started with --join takes its place.
func TestReplaceADeadNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	var dead *Node
	for _, n := range c.followers(leader) {
		dead = n
	}
	dead.Kill()
	var alive *Node
	for _, n := range c.followers(leader) {
		alive = n
	}

	var ans admin.PeerChangeAnswer
	if status, body := post(t, alive.HTTPAddr(), admin.PathRemovePeer, `{"id":"`+dead.cfg.NodeID+`"}`, &ans); status != http.StatusOK {
		t.Fatalf("remove-peer %s through %s: %d %s", dead.cfg.NodeID, alive.cfg.NodeID, status, body)
	}
	if ans.LeaderID != leader.cfg.NodeID || len(ans.Servers) != 2 {
		t.Fatalf("remove-peer answered %+v", ans)
	}
	if registered(leader, dead.cfg.NodeID) {
		t.Fatalf("%s is still registered after remove-peer", dead.cfg.NodeID)
	}
	// Again: idempotent.
	if status, body := post(t, leader.HTTPAddr(), admin.PathRemovePeer, `{"id":"`+dead.cfg.NodeID+`"}`, nil); status != http.StatusOK {
		t.Fatalf("remove-peer again: %d %s", status, body)
	}
	// Bad input is refused by any node, nothing changed.
	for _, body := range []string{`{"id":""}`, `{"id":"c9","bogus":1}`, `not json`} {
		if status, _ := post(t, alive.HTTPAddr(), admin.PathRemovePeer, body, nil); status != http.StatusBadRequest {
			t.Fatalf("remove-peer %s: %d, want 400", body, status)
		}
	}
	if status, _ := post(t, alive.HTTPAddr(), admin.PathAddPeer, `{"id":"c9"}`, nil); status != http.StatusBadRequest {
		t.Fatalf("add-peer without an address: %d, want 400", status)
	}

	c5 := startJoiner(t, "c5", "", leader.HTTPAddr(), alive.HTTPAddr())
	want := []string{leader.cfg.NodeID, alive.cfg.NodeID, "c5"}
	slices.Sort(want)
	eventually(t, 15*time.Second, "c5 a voter and registered", func() bool {
		return slices.Equal(voters(t, leader), want) && registered(leader, "c5")
	})
	// The cluster of three keeps a quorum without the old leader.
	leader.Kill()
	eventually(t, 15*time.Second, "a new leader among the two left", func() bool {
		return alive.IsLeader() || c5.IsLeader()
	})
}

// An operator adds a voter by id and address (ctl add-peer) before starting it with --join; the
// join then finds itself in the configuration and asks nothing.
func TestAddPeerThenStartIt(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	ln := listenLoopback(t)
	addr := ln.Addr().String()
	var ans admin.PeerChangeAnswer
	if status, body := post(t, c.followers(leader)[0].HTTPAddr(), admin.PathAddPeer, `{"id":"c4","raft_addr":"`+addr+`"}`, &ans); status != http.StatusOK {
		t.Fatalf("add-peer: %d %s", status, body)
	}
	if !slices.ContainsFunc(ans.Servers, func(p admin.RaftServerView) bool { return p.ID == "c4" && p.RaftAddr == addr && p.Voter }) {
		t.Fatalf("add-peer answered %+v", ans)
	}
	n, err := New(Config{NodeID: "c4", DataDir: t.TempDir(), Join: []string{leader.HTTPAddr()}, Timing: testTiming, NoSync: true,
		Logger: testLogger(t), RaftListener: ln, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	eventually(t, 15*time.Second, "c4 registered", func() bool { return registered(leader, "c4") && n.inConfiguration("c4") })
}

// A node told to join, with an empty data directory and nobody answering, never elects itself:
// it has no configuration, so it neither votes nor stands. Its readiness says why.
func TestJoinNodeAloneNeverElectsItself(t *testing.T) {
	dead := listenLoopback(t)
	addr := dead.Addr().String()
	_ = dead.Close()
	n := startJoiner(t, "c9", "", addr)
	// Several election timeouts of the node, on its own clock: Raft would have elected a
	// bootstrapped single node well within them.
	deadline := time.Now().Add(10 * n.cfg.ElectionTimeout)
	for time.Now().Before(deadline) {
		if n.IsLeader() || n.raft.State() == raft.Candidate {
			t.Fatalf("a --join node with nobody to join became %v", n.raft.State())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if servers, err := n.configuration(); err != nil || len(servers) != 0 {
		t.Fatalf("configuration %+v (%v), want none", servers, err)
	}
	var rd admin.Readiness
	if status := getJSON(t, n.HTTPAddr(), admin.PathReadyz, &rd); status != http.StatusServiceUnavailable || rd.Ready {
		t.Fatalf("readyz %d %+v", status, rd)
	}
}

// Removing the leader through a follower: the leader forgets its registration, leaves the
// configuration and steps down; the two others elect a leader, and the removed node does not
// register again.
func TestRemoveTheLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	if status, body := post(t, follower.HTTPAddr(), admin.PathRemovePeer, `{"id":"`+leader.cfg.NodeID+`"}`, nil); status != http.StatusOK {
		t.Fatalf("remove-peer of the leader: %d %s", status, body)
	}
	var next *Node
	eventually(t, 15*time.Second, "a new leader without the removed one", func() bool {
		for _, n := range c.followers(leader) {
			if n.IsLeader() {
				next = n
			}
		}
		return next != nil && !leader.IsLeader() && len(voters(t, next)) == 2 && !registered(next, leader.cfg.NodeID)
	})
	// The removed node keeps trying to register and is refused: it stays forgotten.
	time.Sleep(3 * registerRetry)
	if registered(next, leader.cfg.NodeID) || slices.Contains(voters(t, next), leader.cfg.NodeID) {
		t.Fatalf("the removed leader came back: voters %v", voters(t, next))
	}
}

// An admin call made through a follower right after the leader's removal, while the removed node
// may still lead for a moment without its registration and the others then elect, waits for the
// next leader instead of answering no_leader (TestStatefulSetScalesThroughJoin's second
// remove-peer failed so).
func TestAdminCallRightAfterTheLeadersRemoval(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	if status, body := post(t, leader.HTTPAddr(), admin.PathRemovePeer, `{"id":"`+leader.cfg.NodeID+`"}`, nil); status != http.StatusOK {
		t.Fatalf("remove-peer of the leader: %d %s", status, body)
	}
	if status, body := post(t, follower.HTTPAddr(), admin.PathRings+"eu/c1/orders/pause", `{}`, nil); status != http.StatusOK {
		t.Fatalf("a pause through a follower right after the leader's removal: %d %s", status, body)
	}
}

// --join excludes --peers and --recover: one line naming both.
func TestJoinConfigIsChecked(t *testing.T) {
	for name, cfg := range map[string]Config{
		"join and peers":   {NodeID: "c1", Join: []string{"127.0.0.1:7480"}, Peers: []Peer{{ID: "c1", RaftAddr: "127.0.0.1:7400"}}},
		"join and recover": {NodeID: "c1", Join: []string{"127.0.0.1:7480"}, Recover: true},
		"empty join":       {NodeID: "c1", Join: []string{""}},
	} {
		err := cfg.Validate()
		if !errors.Is(err, ErrBadConfig) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line of ErrBadConfig", name, err)
		}
	}
}
