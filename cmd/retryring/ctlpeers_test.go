package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
)

// ctl add-peer and remove-peer against a real single-node coordinator: a remove of a node that is
// not there answers the configuration (idempotent), the last voter cannot be removed, and bad
// arguments give one line naming what is wrong.
func TestCtlPeers(t *testing.T) {
	addr := startCoordinator(t)
	deadline := time.Now().Add(20 * time.Second)
	out, err := ctl(t, "remove-peer", "c9", "--coordinator", addr)
	for err != nil && strings.Contains(err.Error(), "no_leader") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		out, err = ctl(t, "remove-peer", "c9", "--coordinator", addr)
	}
	if err != nil || !strings.Contains(out, "leader c1") || !strings.Contains(out, "c1") {
		t.Fatalf("remove-peer of an absent node: %v\n%s", err, out)
	}
	out, err = ctl(t, "remove-peer", "c9", "--coordinator", addr, "-o", "json")
	var ans admin.PeerChangeAnswer
	if err != nil || json.Unmarshal([]byte(out), &ans) != nil || len(ans.Servers) != 1 || ans.Servers[0].ID != "c1" || !ans.Servers[0].Voter {
		t.Fatalf("remove-peer -o json: %v\n%s", err, out)
	}
	if _, err := ctl(t, "remove-peer", "c1", "--coordinator", addr); err == nil || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("removing the last voter: %v", err)
	}
	// Adding the voter c1 at another address would evict it: refused in one line saying what to do;
	// --replace does not replace the leader that answers.
	if _, err := ctl(t, "add-peer", "c1", "127.0.0.1:1", "--coordinator", addr); err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "peer_conflict: node id c1 is a voter already, at ") || !strings.Contains(err.Error(), "ctl remove-peer c1") {
		t.Fatalf("add-peer of the voter c1 at another address: %v", err)
	}
	if _, err := ctl(t, "add-peer", "--replace", "c1", "127.0.0.1:1", "--coordinator", addr); err == nil ||
		!strings.Contains(err.Error(), "peer_conflict: node id c1 is the leader answering this call") {
		t.Fatalf("add-peer --replace of the leader: %v", err)
	}
	for _, args := range [][]string{{"add-peer", "c2"}, {"add-peer", "c2", "nohost"}, {"remove-peer"}, {"add-peer", "c 2", "127.0.0.1:1"}} {
		_, err := ctl(t, append(args, "--coordinator", addr)...)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Fatalf("ctl %v: %v, want one line", args, err)
		}
	}
}

// ctl peers keeps its STATE column to one word; why a peer has no status is said below the table.
func TestPrintPeersStateIsOneWord(t *testing.T) {
	var out strings.Builder
	err := printPeers(&out, admin.PeersAnswer{CoordinatorID: "c1", LeaderID: "c1", Peers: []admin.PeerStatus{
		{ID: "c1", RaftAddr: "10.0.0.1:7400", Voter: true, Status: &admin.NodeStatus{ID: "c1", State: "leader", LastContact: "0"}},
		{ID: "c2", RaftAddr: "10.0.0.2:7400", Voter: true, Problem: admin.PeerUnreachable, Error: "unreachable at 10.0.0.2:7480: dial tcp: connection refused"},
		{ID: "c3", RaftAddr: "10.0.0.3:7400", Voter: true, Problem: admin.PeerUnknown, Error: "not known yet: c1 (asked) has not applied its log since it started"},
		{ID: "c4", RaftAddr: "10.0.0.4:7400", Voter: true, Error: "an older coordinator's reason"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	states := map[string]string{}
	for _, l := range lines[3:7] {
		f := strings.Fields(l)
		states[f[0]] = f[1]
		if f[2] != "true" {
			t.Errorf("row %q: STATE is more than one word", l)
		}
	}
	if want := map[string]string{"c1": "leader", "c2": "unreachable", "c3": "unknown", "c4": "unreachable"}; !maps.Equal(states, want) {
		t.Errorf("states %v, want %v:\n%s", states, want, out.String())
	}
	if got := strings.Join(lines[8:], "\n"); got != "c2: unreachable at 10.0.0.2:7480: dial tcp: connection refused\n"+
		"c3: not known yet: c1 (asked) has not applied its log since it started\nc4: an older coordinator's reason" {
		t.Errorf("reasons:\n%s", got)
	}
}
