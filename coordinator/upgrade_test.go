package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// fixtureV3 is a Raft data directory per coordinator written by the release before issue 10 (FSM
// version 3), with the ring view its leader answered just before it stopped
// (testdata/upgrade/v3/README.md says how it was made).
const fixtureV3 = "testdata/upgrade/v3"

// fixtureRaftAddrs are the Raft addresses of the fixture's configuration; the test's nodes
// listen elsewhere and dial through a map (Config.RaftDial), so no fixed port is needed.
var fixtureRaftAddrs = []string{"127.0.0.1:27401", "127.0.0.1:27402", "127.0.0.1:27403"}

// copyDir copies a fixture directory (regular files and directories only).
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}

// startFixtureCluster starts the new code's nodes on copies of the fixture's data directories.
func startFixtureCluster(t *testing.T, fixture string) *testCluster {
	t.Helper()
	log := testLogger(t)
	lns := make([]net.Listener, len(fixtureRaftAddrs))
	route := map[string]string{}
	var peers []Peer
	for i, a := range fixtureRaftAddrs {
		lns[i] = listenLoopback(t)
		route[a] = lns[i].Addr().String()
		peers = append(peers, Peer{ID: fmt.Sprintf("c%d", i+1), RaftAddr: a})
	}
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if real, ok := route[addr]; ok {
			addr = real
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	tc := &testCluster{t: t}
	for i := range fixtureRaftAddrs {
		dir := t.TempDir()
		copyDir(t, filepath.Join(fixture, peers[i].ID), dir)
		n, err := New(Config{
			NodeID: peers[i].ID, DataDir: dir, Peers: peers, Timing: testTiming, NoSync: true, Logger: log,
			RaftListener: lns[i], RaftAdvertise: peers[i].RaftAddr, RaftDial: dial,
			RSocketListener: listenLoopback(t), HTTPListener: listenLoopback(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		tc.nodes = append(tc.nodes, n)
	}
	for _, n := range tc.nodes {
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Kill)
	}
	return tc
}

// replicatedRing is what a ring's replicated state says, as the view shows it, without what
// depends on the node or the moment (lease estimates, reports).
type replicatedRing struct {
	Key        string
	Generation uint64
	Paused     bool
	PausedImpl []string
	Reason     string
	RatePerS   *float64
	SinceMs    int64
	Members    []replicatedMember
}

type replicatedMember struct {
	WorkerID, Incarnation string
	NodeIndex             int
	Epoch                 uint64
	Ranges                []lease.WireRange
	State                 string
}

func replicatedRings(v admin.RingView) map[string]replicatedRing {
	out := map[string]replicatedRing{}
	for _, r := range v.Rings {
		rr := replicatedRing{Key: r.Region + "/" + r.Cluster + "/" + r.Service, Generation: r.Generation,
			Paused: r.Controls.Paused, PausedImpl: r.Controls.PausedImpl, Reason: r.Controls.Reason,
			RatePerS: r.Controls.RatePerS, SinceMs: r.Controls.SinceMs}
		for _, m := range r.Members {
			rr.Members = append(rr.Members, replicatedMember{WorkerID: m.WorkerID, Incarnation: m.Incarnation,
				NodeIndex: m.NodeIndex, Epoch: m.Epoch, Ranges: m.Ranges, State: m.State})
		}
		out[rr.Key] = rr
	}
	return out
}

// The new code opens the Raft data of the release before it (a snapshot and log entries after it,
// on every node): the replicated state is the one the old leader showed, the cluster elects a
// leader, commits its epoch floor once every node registered FSM version 4, and a new client gets
// a lease whose epoch is above every epoch the old release sent.
func TestUpgradeReplaysTheV3Fixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtureV3, "expected-view.json"))
	if err != nil {
		t.Fatal(err)
	}
	var old admin.RingView
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatalf("expected-view.json: %v", err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		snaps, _ := filepath.Glob(filepath.Join(fixtureV3, id, "snapshots", "*", "state.bin"))
		if len(snaps) == 0 {
			t.Fatalf("fixture %s has no snapshot", id)
		}
	}
	want := replicatedRings(old)
	var oldMax uint64
	for _, r := range old.Rings {
		for _, m := range r.Members {
			oldMax = max(oldMax, m.Epoch)
		}
	}

	c := startFixtureCluster(t, fixtureV3)
	// Every node applies the whole log (snapshot + entries after it) before anything changes the
	// rings: the old members are downed only past the holder bound of the old TTL (10 s).
	for _, n := range c.nodes {
		eventually(t, 15*time.Second, n.cfg.NodeID+" applied the fixture's log", func() bool {
			got := replicatedRings(n.View())
			return reflect.DeepEqual(got, want)
		})
	}
	leader := c.leader()
	for _, n := range c.nodes {
		if v := n.fsm.Version(); v != fsm.Version {
			t.Fatalf("%s runs FSM version %d", n.cfg.NodeID, v)
		}
	}
	var floor uint64
	eventually(t, 15*time.Second, "an epoch floor committed after the upgrade", func() bool {
		leader.fsm.View(func(s *fsm.State, _ uint64) { floor = s.EpochFloor })
		return floor > oldMax
	})
	leader.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Settling {
			t.Fatalf("an upgraded cluster is settling: it lost nothing")
		}
	})
	if got := replicatedRings(leader.View()); !reflect.DeepEqual(got, want) {
		t.Fatalf("the floor changed the rings:\n got %+v\nwant %+v", got, want)
	}

	w := newTestWorker(t, "fresh", c.rsocketAddrs()...)
	w.ring = lease.RingKey{Region: "eu", Cluster: "k1", Service: "shipping"}
	w.start()
	eventually(t, 15*time.Second, "a lease for a new client", func() bool {
		g, ok := w.latest()
		return ok && len(g.lease.Ranges) > 0
	})
	if g, _ := w.latest(); g.lease.Epoch <= floor {
		t.Fatalf("new lease of epoch %d, not above the floor %d (old release's highest epoch %d)", g.lease.Epoch, floor, oldMax)
	}
}
