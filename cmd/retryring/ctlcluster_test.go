package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker/leaseclient"
)

// startCluster runs a three-node coordinator cluster on loopback and returns its nodes once one
// leads and every node knows it.
func startCluster(t *testing.T) []*coordinator.Node {
	t.Helper()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	raftLns := make([]net.Listener, 3)
	peers := make([]coordinator.Peer, 3)
	for i := range raftLns {
		raftLns[i] = listen()
		peers[i] = coordinator.Peer{ID: fmt.Sprintf("c%d", i+1), RaftAddr: raftLns[i].Addr().String()}
	}
	var nodes []*coordinator.Node
	for i := range 3 {
		n, err := coordinator.New(coordinator.Config{NodeID: peers[i].ID, DataDir: t.TempDir(), Peers: peers, NoSync: true,
			Logger: zerolog.Nop(), RaftListener: raftLns[i], RSocketListener: listen(), HTTPListener: listen(),
			Timing: lease.Timing{TTL: 3 * time.Second, Renewal: 500 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Kill)
		nodes = append(nodes, n)
	}
	waitFor(t, "a leader every node knows, every node ready and registered", func() bool {
		for _, n := range nodes {
			out, err := ctl(t, "status", "--coordinator", "http://"+n.HTTPAddr(), "-o", "json")
			var ans admin.StatusAnswer
			if err != nil || json.Unmarshal([]byte(out), &ans) != nil || ans.Leader == nil || !ans.Node.Ready || ans.Leader.RSocketAddr == "" ||
				ans.Node.HTTPAddr == "" {
				return false
			}
		}
		return true
	})
	return nodes
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOf asks node for the leader's id.
func leaderOf(t *testing.T, n *coordinator.Node) string {
	t.Helper()
	out, err := ctl(t, "status", "--coordinator", n.HTTPAddr(), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ans admin.StatusAnswer
	if err := json.Unmarshal([]byte(out), &ans); err != nil {
		t.Fatal(err)
	}
	return ans.Node.LeaderID
}

// ctl status, peers, step-down, cordon and uncordon against a real cluster with a real worker,
// through a follower, in table and JSON output.
func TestCtlClusterCommands(t *testing.T) {
	nodes := startCluster(t)
	leaderID := leaderOf(t, nodes[0])
	var follower, other *coordinator.Node
	var followerID, otherID string
	for i, n := range nodes {
		id := fmt.Sprintf("c%d", i+1)
		switch {
		case id == leaderID:
		case follower == nil:
			follower, followerID = n, id
		default:
			other, otherID = n, id
		}
	}
	at := []string{"--coordinator", "http://" + follower.HTTPAddr()}

	out, err := ctl(t, append([]string{"status"}, at...)...)
	if err != nil {
		t.Fatalf("ctl status: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 4 && strings.HasPrefix(lines[3], "note: leader "+leaderID+" is settling") {
		lines = lines[:3] // a new cluster's leader may still be settling (settle.go)
	}
	if len(lines) != 3 || !strings.Contains(lines[0], "READY") ||
		strings.Join(strings.Fields(lines[1])[:4], " ") != "asked "+followerID+" follower "+strings.Fields(lines[1])[3] ||
		strings.Fields(lines[1])[4] != leaderID || strings.Join(strings.Fields(lines[2])[:3], " ") != "leader "+leaderID+" leader" ||
		!strings.HasSuffix(lines[1], "yes") || !strings.HasSuffix(lines[2], "yes") {
		t.Errorf("ctl status:\n%s", out)
	}
	out, err = ctl(t, append([]string{"peers"}, at...)...)
	if err != nil {
		t.Fatalf("ctl peers: %v", err)
	}
	if strings.Count(out, "follower") != 2 || strings.Count(out, "leader") < 2 || !strings.Contains(out, other.HTTPAddr()) {
		t.Errorf("ctl peers:\n%s", out)
	}

	// A real worker, then cordon it: it keeps its connection and holds no range.
	ring := lease.RingKey{Region: "eu", Cluster: "prod", Service: "orders"}
	var rsocket []string
	for _, n := range nodes {
		rsocket = append(rsocket, n.RSocketAddr())
	}
	w, err := leaseclient.New(leaseclient.Config{WorkerID: "w1", Ring: ring, Coordinators: rsocket, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "w1 holds the ring", func() bool {
		l, ok := w.Current()
		return ok && l.Ranges.Equal(lease.Ranges{lease.FullRing})
	})

	out, err = ctl(t, append([]string{"cordon", "w1"}, at...)...)
	if err != nil || !strings.Contains(out, "worker w1 in ring eu/prod/orders cordoned") {
		t.Fatalf("ctl cordon w1: %q (%v)", out, err)
	}
	waitFor(t, "w1 holds nothing and is not Node-0", func() bool {
		l, ok := w.Current()
		return ok && l.Ranges.Empty() && !l.IsNode0()
	})
	out, err = ctl(t, append([]string{"ring"}, at...)...)
	if err != nil || !strings.Contains(out, "cordoned") {
		t.Fatalf("ctl ring does not show the cordon: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"uncordon", "w1", "--ring", "eu/prod/orders", "-o", "json"}, at...)...)
	var ans admin.CordonAnswer
	if err != nil || json.Unmarshal([]byte(out), &ans) != nil || ans.Cordoned || ans.WorkerID != "w1" || ans.LeaderID != leaderID {
		t.Fatalf("ctl uncordon -o json: %q (%v)", out, err)
	}
	waitFor(t, "w1 holds the ring again", func() bool {
		l, ok := w.Current()
		return ok && l.Ranges.Equal(lease.Ranges{lease.FullRing}) && l.IsNode0()
	})

	// Step down through a follower, to the other follower.
	out, err = ctl(t, append([]string{"step-down", "--to", otherID}, at...)...)
	if err != nil || !strings.Contains(out, "leadership handed from "+leaderID+" to "+otherID) {
		t.Fatalf("ctl step-down --to %s: %q (%v)", otherID, out, err)
	}
	waitFor(t, "every node knows the new leader", func() bool {
		for _, n := range nodes {
			if leaderOf(t, n) != otherID {
				return false
			}
		}
		return true
	})
	if l, ok := w.Current(); !ok || !l.Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("w1 lost its lease in the handover: %+v %v", l, ok)
	}
}

// Every failure is one line naming what is wrong.
func TestCtlErrors(t *testing.T) {
	addr := startCoordinator(t)
	waitFor(t, "the node leads", func() bool {
		out, err := ctl(t, "status", "--coordinator", addr, "-o", "json")
		var ans admin.StatusAnswer
		return err == nil && json.Unmarshal([]byte(out), &ans) == nil && ans.Node.Ready && ans.Node.State == "leader"
	})
	waitFor(t, "the leader's term is ready for changes", func() bool {
		_, err := ctl(t, "cordon", "nobody", "--coordinator", addr)
		return err != nil && !strings.Contains(err.Error(), "no_leader")
	})
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--coordinator", "http://127.0.0.1:1"}, "coordinator unreachable at http://127.0.0.1:1: dial tcp"},
		{[]string{"status", "--coordinator", "ftp://x"}, `--coordinator "ftp://x": want HOST:PORT, http://HOST:PORT or https://HOST:PORT`},
		{[]string{"status", "--coordinator", addr + "/v1"}, "want HOST:PORT, http://HOST:PORT"},
		{[]string{"status", "--coordinator", addr, "-o", "yaml"}, `-o: want table or json, got "yaml"`},
		{[]string{"status", "--coordinator", addr, "--ca", "ca.pem"}, "are for an https:// coordinator"},
		{[]string{"status", "--coordinator", "https://127.0.0.1:1", "--ca", "/nonexistent/ca.pem"}, "--ca/--cert/--key: tls: CA file"},
		{[]string{"status", "--coordinator", addr, "--token-file", "/nonexistent/token"}, "--token-file: open /nonexistent/token"},
		{[]string{"status", "--coordinator", addr, "--token-file", token}, "want one token on one line"},
		{[]string{"cordon", "nobody", "--coordinator", addr}, `404 Not Found: unknown_worker: no worker "nobody" in any ring`},
		{[]string{"cordon", "--coordinator", addr}, "ctl cordon WORKER: give WORKER, the worker's id"},
		{[]string{"cordon", "w1", "--ring", "eu/prod", "--coordinator", addr}, "want REGION/CLUSTER/SERVICE"},
		{[]string{"step-down", "--coordinator", addr, "--to", "c9"}, `400 Bad Request: bad_request: "c9" is not a voter`},
		{[]string{"step-down", "--coordinator", addr}, "503 Service Unavailable: unavailable: leadership transfer from c1 failed"},
		{[]string{"status", "--no-such-flag"}, "unknown flag: --no-such-flag"},
	} {
		_, err := ctl(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ctl %s: %v, want one line with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
