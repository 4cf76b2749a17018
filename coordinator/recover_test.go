package coordinator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
)

// Three nodes, two lost for good: the survivor is recovered alone from a peers.json the operator
// wrote, with the state it kept (the ring, its pause). Its first term settles the state: no lease
// is sent before every lease of before may have ended, and the epochs start above every epoch the
// old cluster may have sent. Then two new nodes join it.
func TestRecoverTheSurvivorOfALostQuorum(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	if status, body := post(t, leader.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{"impl":["refund"],"reason":"before the loss"}`, nil); status != http.StatusOK {
		t.Fatalf("pause: %d %s", status, body)
	}
	w := newTestWorker(t, "w1", c.rsocketAddrs()...)
	w.features = []string{"controls"}
	w.start()
	eventually(t, 15*time.Second, "w1 leased", func() bool { _, ok := w.latest(); return ok })
	old, _ := w.latest()

	survivor := c.followers(leader)[0]
	for _, n := range c.nodes {
		n.Kill()
	}
	w.close()

	dir := survivor.cfg.DataDir
	ln := listenLoopback(t)
	peers := `[{"id":"` + survivor.cfg.NodeID + `","address":"` + ln.Addr().String() + `","non_voter":false}]`
	if err := os.WriteFile(filepath.Join(dir, PeersFile), []byte(peers), 0o640); err != nil {
		t.Fatal(err)
	}
	rec, err := New(Config{NodeID: survivor.cfg.NodeID, DataDir: dir, Recover: true, Timing: testTiming, NoSync: true,
		Logger: testLogger(t), RaftListener: ln, RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(context.Background()); err != nil {
		t.Fatalf("recover: %v", err)
	}
	t.Cleanup(rec.Kill)
	if _, err := os.Stat(filepath.Join(dir, PeersFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("peers.json still there after recovery (%v): a restart would recover again", err)
	}

	rc := &testCluster{t: t, nodes: []*Node{rec}}
	rc.leader()
	term := rec.currentTerm()
	if c := controlsOn(rec); c == nil || !slices.Equal(c.PausedImpl, []string{"refund"}) {
		t.Fatalf("the recovered state lost the pause: %+v", c)
	}

	w2 := newTestWorker(t, "w1", rec.RSocketAddr()) // the same incarnation reconnects
	w2.features = []string{"controls"}
	w2.start()
	eventually(t, 15*time.Second, "w1 leased by the recovered cluster", func() bool { _, ok := w2.latest(); return ok })
	first := w2.history()[0]
	var floor uint64
	rec.fsm.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
	if first.lease.Epoch <= floor || floor <= old.lease.Epoch {
		t.Fatalf("epoch %d after recovery, floor %d, epoch before the loss %d: want epoch > floor > old epoch", first.lease.Epoch, floor, old.lease.Epoch)
	}
	term.mu.Lock()
	until := term.times.HoldsAliveUntil()
	term.mu.Unlock()
	if first.at.Before(until) {
		t.Fatalf("first lease after recovery asked for at %s, before every earlier lease may have ended (%s)",
			first.at.Format("15:04:05.000"), until.Format("15:04:05.000"))
	}
	rec.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Settling {
			t.Fatalf("still settling after the first assignment")
		}
	})
	if _, err := os.Stat(filepath.Join(dir, recoveredMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recovery marker left behind: %v", err)
	}

	c4 := startJoiner(t, "c4", "", rec.HTTPAddr())
	c5 := startJoiner(t, "c5", "", rec.HTTPAddr())
	eventually(t, 20*time.Second, "c4 and c5 voters with the recovered state", func() bool {
		return slices.Equal(voters(t, rec), []string{survivor.cfg.NodeID, "c4", "c5"}) &&
			controlsOn(c4) != nil && controlsOn(c5) != nil
	})
}

// --recover refuses a data directory without state, and a configuration without this node.
func TestRecoverRefusesBadInput(t *testing.T) {
	n, err := New(Config{NodeID: "c1", DataDir: t.TempDir(), Recover: true, NoSync: true, Logger: testLogger(t),
		RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrNothingToRecover) {
		t.Fatalf("recover of an empty directory: %v", err)
	}

	c := newCluster(t, 1, nil)
	c.leader()
	dir := c.nodes[0].cfg.DataDir
	c.nodes[0].Kill()
	if err := os.WriteFile(filepath.Join(dir, PeersFile), []byte(`[{"id":"c7","address":"127.0.0.1:1","non_voter":false}]`), 0o640); err != nil {
		t.Fatal(err)
	}
	n, err = New(Config{NodeID: "c1", DataDir: dir, Recover: true, NoSync: true, Logger: testLogger(t),
		RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("recover into a configuration without this node: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, PeersFile), []byte(`{not json`), 0o640); err != nil {
		t.Fatal(err)
	}
	n, err = New(Config{NodeID: "c1", DataDir: dir, Recover: true, NoSync: true, Logger: testLogger(t),
		RaftListener: listenLoopback(t), RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("recover with a malformed peers.json: %v", err)
	}
}

// A freshly bootstrapped cluster settles as a recovered one does: its workers may hold leases
// of a cluster that ran before it on these addresses (a re-bootstrap after losing every data
// directory), so its first lease waits out every lease of before, with epochs above the floor.
func TestFreshClusterWaitsOutEarlierLeases(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *Config) { cfg.trustFreshState = false })
	leader := c.leader()
	term := leader.currentTerm()
	w := newTestWorker(t, "w1", c.rsocketAddrs()...).start()
	eventually(t, 15*time.Second, "w1 leased", func() bool { _, ok := w.latest(); return ok })
	first := w.history()[0]
	var floor uint64
	leader.fsm.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
	term.mu.Lock()
	until := term.times.HoldsAliveUntil()
	term.mu.Unlock()
	if first.lease.Epoch <= floor || first.at.Before(until) {
		t.Fatalf("first lease: epoch %d (floor %d), asked for at %s, every earlier lease ended by %s",
			first.lease.Epoch, floor, first.at.Format("15:04:05.000"), until.Format("15:04:05.000"))
	}
}

// Two survivors recovered together from one peers.json: the first to lead settles the cluster;
// the other, leading later, finds the floor its marker predates and does not settle it again
// (a healthy cluster's workers would lose their cover for a TTL).
func TestRecoverTwoSurvivorsSettlesOnce(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	w := newTestWorker(t, "w1", c.rsocketAddrs()...).start()
	eventually(t, 15*time.Second, "w1 leased", func() bool { _, ok := w.latest(); return ok })
	survivors := c.followers(leader)
	for _, n := range c.nodes {
		n.Kill()
	}
	w.close()

	lns := []net.Listener{listenLoopback(t), listenLoopback(t)}
	peers := "["
	for i, s := range survivors {
		if i > 0 {
			peers += ","
		}
		peers += `{"id":"` + s.cfg.NodeID + `","address":"` + lns[i].Addr().String() + `","non_voter":false}`
	}
	peers += "]"
	rc := &testCluster{t: t}
	for i, s := range survivors {
		if err := os.WriteFile(filepath.Join(s.cfg.DataDir, PeersFile), []byte(peers), 0o640); err != nil {
			t.Fatal(err)
		}
		n, err := New(Config{NodeID: s.cfg.NodeID, DataDir: s.cfg.DataDir, Recover: true, Timing: testTiming, NoSync: true,
			Logger: testLogger(t), RaftListener: lns[i], RaftAdvertise: lns[i].Addr().String(),
			RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Kill)
		rc.nodes = append(rc.nodes, n)
	}
	first := rc.leader()
	var floor uint64
	eventually(t, 15*time.Second, "the recovered cluster settled", func() bool {
		settling := true
		first.fsm.View(func(s *fsm.State, _ uint64) { floor, settling = s.EpochFloor, s.Settling })
		return !settling && floor > 0
	})
	other := rc.followers(first)[0]
	eventually(t, 15*time.Second, "the other survivor leads", func() bool {
		if other.IsLeader() {
			return true
		}
		_ = first.raft.LeadershipTransfer().Error()
		return false
	})
	rc.leader()
	other.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Settling || s.EpochFloor != floor {
			t.Fatalf("the second survivor settled again: settling %v, floor %d (was %d)", s.Settling, s.EpochFloor, floor)
		}
	})
	for _, n := range rc.nodes {
		if _, err := os.Stat(filepath.Join(n.cfg.DataDir, recoveredMarker)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s kept its recovery marker: %v", n.cfg.NodeID, err)
		}
	}
}
