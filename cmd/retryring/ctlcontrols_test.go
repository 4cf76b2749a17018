package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
)

// startCoordinator runs a single-node coordinator on loopback and returns its admin address.
func startCoordinator(t *testing.T) string {
	t.Helper()
	return "http://" + startCoordinatorNode(t).HTTPAddr()
}

// startCoordinatorNode runs a single-node coordinator on loopback.
func startCoordinatorNode(t *testing.T) *coordinator.Node {
	t.Helper()
	var lns []net.Listener
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
	}
	n, err := coordinator.New(coordinator.Config{NodeID: "c1", DataDir: t.TempDir(), NoSync: true, Logger: zerolog.Nop(),
		RaftListener: lns[0], RSocketListener: lns[1], HTTPListener: lns[2]})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

// ctl runs `retryring ctl args...` and returns its output and error.
func ctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"ctl"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestCtlPauseResumeLimit(t *testing.T) {
	addr := startCoordinator(t)
	ring := []string{"--coordinator", addr, "--ring", "eu/prod/orders"}
	// The node leads once its term is ready; until then it answers no_leader.
	pause := append([]string{"pause"}, append(ring, "--impl", "payment", "--impl", "email", "--reason", "provider down")...)
	deadline := time.Now().Add(20 * time.Second)
	out, err := ctl(t, pause...)
	for err != nil && strings.Contains(err.Error(), "no_leader") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		out, err = ctl(t, pause...)
	}
	if err != nil {
		t.Fatalf("ctl pause: %v", err)
	}
	for _, want := range []string{"ring eu/prod/orders, committed by c1", "PAUSED", "no", "email,payment", "provider down"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl pause printed %q, want %q in it", out, want)
		}
	}

	out, err = ctl(t, append([]string{"limit"}, append(ring, "--per-second", "250", "-o", "json")...)...)
	if err != nil {
		t.Fatalf("ctl limit: %v", err)
	}
	var a admin.ControlsAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.Controls.RatePerS == nil || *a.Controls.RatePerS != 250 ||
		strings.Join(a.Controls.PausedImpl, ",") != "email,payment" {
		t.Fatalf("ctl limit -o json: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"resume"}, append(ring, "--impl", "email")...)...)
	if err != nil || !strings.Contains(out, "payment") || strings.Contains(out, "email") || !strings.Contains(out, "250/s") {
		t.Fatalf("ctl resume --impl email: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"limit"}, append(ring, "--clear")...)...)
	if err != nil || !strings.Contains(out, "none") {
		t.Fatalf("ctl limit --clear: %q (%v)", out, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"limit"}, append(ring, "--per-second", "0")...), "above 0"},
		{append([]string{"limit"}, append(ring, "--per-second", "-2")...), "above 0"},
		{append([]string{"limit"}, append(ring, "--per-second", "NaN")...), "above 0"},
		{append([]string{"limit"}, ring...), "either --per-second N or --clear"},
		{append([]string{"limit"}, append(ring, "--per-second", "3", "--clear")...), "either --per-second N or --clear"},
		{[]string{"pause", "--coordinator", addr, "--ring", "eu/prod"}, "want REGION/CLUSTER/SERVICE"},
		{[]string{"pause", "--coordinator", addr, "--ring", "eu//orders"}, "must all be set"},
		{[]string{"pause", "--coordinator", addr}, "want REGION/CLUSTER/SERVICE"},
		{append([]string{"pause"}, append(ring, "-o", "yaml")...), "want table or json"},
		{append([]string{"pause"}, append(ring, "--reason", strings.Repeat("r", 300))...), "400 Bad Request: bad_request"},
		{[]string{"pause", "--coordinator", "http://127.0.0.1:1", "--ring", "eu/prod/orders"}, "coordinator unreachable"},
	} {
		if _, err := ctl(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ctl %s: %v, want an error mentioning %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCtlRingShowsControls: ctl ring prints each ring's controls and marks a member that did not
// announce the controls feature.
func TestCtlRingShowsControls(t *testing.T) {
	view := `{"coordinator_id":"c1","leader_id":"c1","raft_term":4,"coordinators":[],
	 "rings":[{"region":"eu","cluster":"c1","service":"orders","generation":5,
	  "controls":{"paused":true,"paused_impl":["payment"],"reason":"provider down","rate_per_s":25,"since_ms":1764590400000},
	  "members":[
	   {"worker_id":"w1","node_index":0,"epoch":12,"ranges":[],"lease_expires_ms":0,"state":"active","controls":true},
	   {"worker_id":"w2","node_index":1,"epoch":13,"ranges":[],"lease_expires_ms":0,"state":"active","controls":false}]},
	  {"region":"eu","cluster":"c1","service":"billing","generation":1,
	   "controls":{"paused":false,"paused_impl":[],"reason":"","rate_per_s":null,"since_ms":0},"members":[]}]}`
	out, err := runCtlRing(t, view)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"controls: paused yes  paused impl payment  limit 25/s  reason provider down  since 2025-12-01T12:00:00Z",
		"controls: none",
		"w2 (no controls)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl ring lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "w1 (no controls)") {
		t.Errorf("w1 announced controls, yet it is marked:\n%s", out)
	}
}
