package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
)

// TestCtlMovement: ctl movement sets a ring's mode and prints it as committed; the coordinator's
// refusal of parameters lease/minimal does not hold for comes back with its reason; bad
// arguments are refused before any call, each with what is wrong.
func TestCtlMovement(t *testing.T) {
	addr := startCoordinator(t)
	conn := []string{"--coordinator", addr}
	minimal := append([]string{"movement", "eu/prod/orders", "minimal"}, conn...)
	deadline := time.Now().Add(20 * time.Second)
	out, err := ctl(t, minimal...)
	for err != nil && strings.Contains(err.Error(), "no_leader") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		out, err = ctl(t, minimal...)
	}
	if err != nil || !strings.Contains(out, "ring eu/prod/orders movement: minimal  tolerance 0.1  max ranges 16  return delay 10s  even-out ≤8 moves per 10s idle  since ") || !strings.Contains(out, "(committed by c1)") {
		t.Fatalf("ctl movement minimal: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"movement", "eu/prod/orders", "minimal", "--tolerance", "0.25", "--max-ranges", "9", "-o", "json"}, conn...)...)
	var a admin.MovementAnswer
	if err != nil || json.Unmarshal([]byte(out), &a) != nil || a.Movement.Mode != "minimal" || a.Movement.Tolerance != 0.25 || a.Movement.MaxRanges != 9 {
		t.Fatalf("ctl movement minimal --tolerance 0.25 --max-ranges 9 -o json: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"movement", "eu/prod/orders", "minimal", "--return-delay", "1m", "--idle", "30s", "--step-moves", "2"}, conn...)...)
	if err != nil || !strings.Contains(out, "ring eu/prod/orders movement: minimal  tolerance 0.1  max ranges 16  return delay 1m0s  even-out ≤2 moves per 30s idle  since ") {
		t.Fatalf("ctl movement minimal --return-delay 1m --idle 30s --step-moves 2: %q (%v)", out, err)
	}
	out, err = ctl(t, append([]string{"movement", "eu/prod/orders", "contiguous"}, conn...)...)
	if err != nil || !strings.Contains(out, "ring eu/prod/orders movement: contiguous (committed by c1)") {
		t.Fatalf("ctl movement contiguous: %q (%v)", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"movement", "eu/prod/orders", "minimal", "--max-ranges", "8"}, "400 Bad Request: bad_request: fsm: malformed command: minimal: bad config: max ranges 8 is below ⌈1/τ⌉+2 = 12, the pieces a join may take"},
		{[]string{"movement", "eu/prod/orders", "minimal", "--tolerance", "0.6"}, "--tolerance must be above 0 and at most 0.5 (a fraction of the mean share), got 0.6"},
		{[]string{"movement", "eu/prod/orders", "minimal", "--max-ranges", "-1"}, "--max-ranges must be at least 1, got -1"},
		{[]string{"movement", "eu/prod/orders", "contiguous", "--max-ranges", "16"}, "--tolerance, --max-ranges, --return-delay, --idle and --step-moves are parameters of the minimal mode; contiguous takes none"},
		{[]string{"movement", "eu/prod/orders", "contiguous", "--idle", "5s"}, "--tolerance, --max-ranges, --return-delay, --idle and --step-moves are parameters of the minimal mode; contiguous takes none"},
		{[]string{"movement", "eu/prod/orders", "minimal", "--return-delay", "500ms"}, "--return-delay must be from 1s to 10m0s in whole milliseconds, got 500ms"},
		{[]string{"movement", "eu/prod/orders", "minimal", "--idle", "2h"}, "--idle must be from 1s to 1h0m0s in whole milliseconds, got 2h0m0s"},
		{[]string{"movement", "eu/prod/orders", "minimal", "--step-moves", "0"}, "--step-moves must be from 1 to 1024, got 0"},
		{[]string{"movement", "eu/prod/orders", "even"}, `MODE "even": want minimal or contiguous`},
		{[]string{"movement", "eu/prod", "minimal"}, `RING: want REGION/CLUSTER/SERVICE, got "eu/prod"`},
		{[]string{"movement", "eu/prod/orders"}, "ctl movement RING MODE: give MODE, the movement mode, minimal or contiguous"},
	} {
		if _, err := ctl(t, append(tc.args, conn...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ctl %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCtlRingShowsMovement: ctl ring prints each ring's movement mode, the worker ids reserved for
// a return, and every member's share and number of ranges.
func TestCtlRingShowsMovement(t *testing.T) {
	view := `{"coordinator_id":"c1","leader_id":"c1","raft_term":4,"coordinators":[],
	 "rings":[{"region":"eu","cluster":"c1","service":"orders","generation":5,
	  "controls":{"paused":false,"paused_impl":[],"reason":"","rate_per_s":null,"since_ms":0},
	  "movement":{"mode":"minimal","tolerance":0.1,"max_ranges":16,"return_delay_ms":10000,"idle_ms":20000,"step_moves":8,"reserved":["w3"],"since_ms":1764590400000},
	  "members":[
	   {"worker_id":"w1","node_index":0,"epoch":12,"ranges":[{"start":"-9223372036854775808","end":"-4611686018427387905"},{"start":"0","end":"4611686018427387903"}],"lease_expires_ms":0,"state":"active"},
	   {"worker_id":"w2","node_index":1,"epoch":13,"ranges":[],"lease_expires_ms":0,"state":"joining"}]},
	  {"region":"eu","cluster":"c1","service":"billing","generation":1,
	   "controls":{"paused":false,"paused_impl":[],"reason":"","rate_per_s":null,"since_ms":0},"movement":{"mode":"contiguous"},"members":[]}]}`
	out, err := runCtlRing(t, view)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"movement: minimal  tolerance 0.1  max ranges 16  return delay 10s  even-out ≤8 moves per 20s idle  reserved for a return: w3  since 2025-12-01T12:00:00Z",
		"movement: contiguous",
		"SHARE",
		"50.0% in 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl ring lacks %q:\n%s", want, out)
		}
	}
}
