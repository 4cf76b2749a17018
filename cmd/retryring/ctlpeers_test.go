package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator"
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
	var ans coordinator.PeerChangeAnswer
	if err != nil || json.Unmarshal([]byte(out), &ans) != nil || len(ans.Servers) != 1 || ans.Servers[0].ID != "c1" || !ans.Servers[0].Voter {
		t.Fatalf("remove-peer -o json: %v\n%s", err, out)
	}
	if _, err := ctl(t, "remove-peer", "c1", "--coordinator", addr); err == nil || !strings.Contains(err.Error(), "last voter") {
		t.Fatalf("removing the last voter: %v", err)
	}
	for _, args := range [][]string{{"add-peer", "c2"}, {"add-peer", "c2", "nohost"}, {"remove-peer"}, {"add-peer", "c 2", "127.0.0.1:1"}} {
		_, err := ctl(t, append(args, "--coordinator", addr)...)
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Fatalf("ctl %v: %v, want one line", args, err)
		}
	}
}
