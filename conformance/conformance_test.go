package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/ringtest"
)

const (
	// scriptTimeout bounds the whole JavaScript conversation (about 12 s on a quiet machine, the
	// minimal-mode joins included; each join waits up to 13 s for its releases on a loaded one);
	// the script has its own, shorter bound, scriptOwnBound, so that it can say which step it was
	// in.
	scriptTimeout   = 80 * time.Second
	scriptOwnBound  = 70 * time.Second
	scriptDir       = "js"
	scriptName      = "client.mjs"
	depsHint        = "run `make conformance-deps` (cd conformance/js && npm ci)"
	nodeMissingHint = "the conformance test needs Node.js 18 or newer on PATH, then " + depsHint
)

// wantChecks are the checks the script must report as passed, in order: a script that stopped
// early or skipped a step must not pass by saying less.
var wantChecks = []string{
	"routing_metadata_bytes",
	"follower_view_not_leader",
	"follower_redirects_to_leader",
	"bad_setup_data_mime",
	"bad_setup_metadata_mime",
	"bad_setup_data",
	"first_lease_whole_ring",
	"renewal_same_epoch",
	"renewal_same_epoch",
	"reconnect_rule",
	"reconnect_same_incarnation",
	"ring_view",
	"controls_in_every_element",
	"admin_bad_request",
	"pause_via_follower",
	"pause_reaches_element",
	"limit_share",
	"resume_reaches_element",
	"unknown_route",
	"bad_request_json",
	"bad_request_worker_id",
	"bad_request_future_epoch",
	"bad_request_interaction",
	"join_shrinks_first",
	"second_waits_for_release",
	"release_ack",
	"second_gets_other_half",
	"no_controls_without_feature",
	"ring_view_two_members",
	"leave_ack",
	"leave_completes_stream",
	"first_covers_ring_again",
	"new_incarnation_closes_old_connection",
	"new_incarnation_waits_for_expiry",
	"movement_minimal_via_follower",
	"minimal_joins_several_ranges",
	"exclusive_by_client_clock",
	"summary",
}

// checkLine is one line of the script's output.
type checkLine struct {
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// TestJSClientSpeaksTheDocumentedProtocol runs js/client.mjs, a client written only from
// docs/protocol.md on rsocket-js, against three real coordinators, giving it a follower's address
// only. It sends a KEEPALIVE every 300 ms, the longest period protocol.md section 3 allows.
func TestJSClientSpeaksTheDocumentedProtocol(t *testing.T) {
	runJSClient(t, 300*time.Millisecond)
}

// TestJSClientOfTheEarlier200msKeepaliveRule: a client written when protocol.md section 3 asked
// for a KEEPALIVE every 200 ms (the coordinators now answer them on the read goroutine) has the
// whole conversation as before.
func TestJSClientOfTheEarlier200msKeepaliveRule(t *testing.T) {
	runJSClient(t, 200*time.Millisecond)
}

// runJSClient runs the script's whole conversation with the given KEEPALIVE period.
func runJSClient(t *testing.T, keepalive time.Duration) {
	node := requireNode(t)

	// The timing of docs/protocol.md's worked timeline (TTL 3 s, renewal 1 s), shorter than the
	// product's defaults (10 s, 2 s) because the script waits for an old incarnation's lease to
	// expire, which would take 10 s alone; a renewal period long enough that a busy machine does
	// not blur "answered at the next renewal".
	// Raft timeouts three times the defaults: this test is about the conversation, not failover, and
	// on a loaded 2-core machine the default 500 ms heartbeat timeout has deposed the leader in the
	// middle of it (a leave answered no_leader).
	c := ringtest.NewCluster(t, ringtest.Options{Timing: lease.Timing{TTL: 3 * time.Second, Renewal: time.Second}.WithDefaults(),
		HeartbeatTimeout: 1500 * time.Millisecond, ElectionTimeout: 1500 * time.Millisecond, LeaderLeaseTimeout: 750 * time.Millisecond})
	leader := c.Leader()
	// A new cluster's first leader assigns nothing until every lease that may be alive from before
	// its bootstrap has run out (protocol.md, architecture.md "Bootstrap and recovery"): a demand
	// made meanwhile is answered only after that wait, later than its own ttl_ms. The script checks
	// the timing of a settled cluster, so it starts once the leader says it is settled.
	waitSettledCluster(t, leader.Node().HTTPAddr())
	var follower *ringtest.Coordinator
	for _, co := range c.Coordinators() {
		if co != leader {
			follower = co
			break
		}
	}
	if follower == nil {
		t.Fatal("the cluster has no follower")
	}
	// The script's address list (protocol.md 9): an address that refuses connections, then the
	// follower. Whichever it starts at, it reaches the follower; when its connection to the leader
	// is lost it must pass the refusing address by and come back through the follower.
	refusing := refusingAddr(t)
	t.Logf("leader %s at %s; the script is given follower %s at %s, and %s, which refuses connections",
		leader.ID, leader.RSocketAddr(), follower.ID, follower.RSocketAddr(), refusing)

	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, scriptName,
		"--follower", follower.RSocketAddr(),
		"--follower-http", follower.Node().HTTPAddr(),
		"--coordinators", refusing+","+follower.RSocketAddr(),
		"--renewal-ms", strconv.FormatInt(c.Options().Timing.Renewal.Milliseconds(), 10),
		"--keepalive-ms", strconv.FormatInt(keepalive.Milliseconds(), 10),
		"--timeout-ms", strconv.FormatInt(scriptOwnBound.Milliseconds(), 10),
	)
	cmd.Dir = scriptDir
	cmd.Env = scriptEnv()
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s %s: %v", node, scriptName, err)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		passed   []string
		failures []string
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		readLines(stdout, func(line string) {
			t.Log(line)
			var l checkLine
			if !strings.HasPrefix(line, "{") {
				return // the closing "N passed, N failed" line
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				mu.Lock()
				failures = append(failures, "unparseable line from the script: "+line)
				mu.Unlock()
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if l.OK {
				passed = append(passed, l.Check)
			} else {
				failures = append(failures, l.Check+": "+l.Error)
			}
		})
	}()
	go func() {
		defer wg.Done()
		readLines(stderr, func(line string) { t.Log("stderr: " + line) })
	}()
	wg.Wait()
	waitErr := cmd.Wait()

	for _, f := range failures {
		t.Errorf("check failed: %s", f)
	}
	if ctx.Err() != nil {
		t.Errorf("the script did not finish within %v", scriptTimeout)
	}
	if waitErr != nil {
		t.Errorf("%s %s: %v", node, scriptName, waitErr)
	}
	if len(failures) == 0 && waitErr == nil && !slices.Equal(passed, wantChecks) {
		t.Errorf("the script passed checks %q, want %q", passed, wantChecks)
	}
	if t.Failed() {
		// A failover in the middle of the conversation ends its streams with not_leader; say so,
		// since the script follows redirects only at the start.
		now, err := c.WaitLeader(time.Second)
		switch {
		case err != nil:
			t.Logf("note: %s led when the script started; now no leader is known (%v)", leader.ID, err)
		case now != leader:
			t.Logf("note: the leader changed during the run, from %s to %s", leader.ID, now.ID)
		}
	}
}

// refusingAddr is a loopback address nothing listens on.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// requireNode returns the path of node and fails the test (never skips it) when node or the
// script's dependencies are missing.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found on PATH: %s", nodeMissingHint)
	}
	for _, dep := range []string{"rsocket-core", "rsocket-flowable", "rsocket-tcp-client"} {
		p := filepath.Join(scriptDir, "node_modules", dep, "package.json")
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s is missing: %s", p, depsHint)
			}
			t.Fatal(err)
		}
	}
	return node
}

// scriptEnv is this process's environment without RETRYRING_* variables: the script learns
// everything from its arguments, not from a developer's shell.
func scriptEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RETRYRING_") {
			env = append(env, kv)
		}
	}
	return env
}

// readLines calls f with each line of r until r ends.
func readLines(r io.Reader, f func(string)) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.Scan() {
		f(s.Text())
	}
}

// waitSettledCluster waits until the coordinator at httpAddr has committed its epoch floor and
// finished settling (GET /v1/status?local=1).
func waitSettledCluster(t *testing.T, httpAddr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			EpochFloor uint64 `json:"epoch_floor"`
			Settling   bool   `json:"settling"`
		}
		resp, err := http.Get("http://" + httpAddr + "/v1/status?local=1")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			_ = resp.Body.Close()
		}
		if err == nil && st.EpochFloor > 0 && !st.Settling {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader did not finish settling within 30 s (status error %v, floor %d, settling %v)", err, st.EpochFloor, st.Settling)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
