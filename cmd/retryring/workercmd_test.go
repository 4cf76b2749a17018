package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
)

// TestWorkerEndpoints: /readyz answers 503 with the reason until a usable lease is held, and
// while the worker's timeouts do not fit it, then 200 with the lease; both it and /healthz say
// which worker and which launch of it answered; /metrics serves the registry; other routes and
// methods are refused.
func TestWorkerEndpoints(t *testing.T) {
	g := lease.NewGuard(lease.SystemClock{}, 100*time.Millisecond)
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "retryring_probe_total", Help: "probe"}))
	misfit := "--exec-timeout 5s + 100ms margin does not fit in the 1s a lease holds at least"
	fit := misfit
	ready := &readiness{}
	srv := httptest.NewServer(workerMux(workerIdentity{"w7", "inc-42", g, ready}, reg))
	defer srv.Close()

	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if resp.Header.Get("Content-Type") == "application/json" {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return resp.StatusCode, body
	}

	if code, b := get("/healthz"); code != 200 || b["ok"] != true || b["worker_id"] != "w7" || b["incarnation"] != "inc-42" {
		t.Errorf("healthz: %d %v", code, b)
	}
	if code, b := get("/readyz"); code != 503 || b["ready"] != false || b["reason"] != "starting" || b["incarnation"] != "inc-42" {
		t.Errorf("readyz before the worker runs: %d %v", code, b)
	}
	// Waiting for Cassandra, refused by the coordinators: both reasons, each in its own field too.
	unreachable := "cassandra unreachable: connect to 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused"
	refused := "the coordinator at 127.0.0.1:2 refused this worker's credentials: rsocket REJECTED_SETUP: unauthorized"
	ready.setCassandra(unreachable)
	ready.setCoordinator(refused)
	if code, b := get("/readyz"); code != 503 || b["reason"] != unreachable+"; "+refused || b["cassandra"] != unreachable || b["coordinator"] != refused {
		t.Errorf("readyz waiting for Cassandra, refused: %d %v", code, b)
	}
	ready.setCassandra("")
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	cycles := newCycleHealth(func() time.Time { return now }, zerolog.Nop())
	ready.running(func() string { return fit }, trustedClock, cycles.reason)
	if code, b := get("/readyz"); code != 503 || b["reason"] != refused {
		t.Errorf("readyz refused by the coordinators: %d %v", code, b)
	}
	ready.setCoordinator("")
	if code, b := get("/readyz"); code != 503 || b["ready"] != false || b["reason"] == "" || b["incarnation"] != "inc-42" {
		t.Errorf("readyz without a lease: %d %v", code, b)
	}
	g.Set(lease.Lease{
		WorkerID: "w7", Ring: lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
		NodeIndex: 1, NodeCount: 2, Epoch: 9, TTL: time.Minute, ValidFrom: time.Now(),
		Ranges: lease.Ranges{{Start: 0, End: lease.MaxToken}},
	})
	if code, b := get("/readyz"); code != 503 || b["ready"] != false || b["reason"] != misfit {
		t.Errorf("readyz with a lease its timeouts do not fit: %d %v", code, b)
	}
	// A refusal from before the worker ran is stale once a lease arrived; Cassandra lost is not.
	ready.setCoordinator(refused)
	if code, b := get("/readyz"); code != 503 || b["reason"] != misfit {
		t.Errorf("readyz with a lease and a stale refusal: %d %v", code, b)
	}
	ready.setCassandra(unreachable)
	if code, b := get("/readyz"); code != 503 || b["reason"] != unreachable {
		t.Errorf("readyz with a lease and Cassandra lost: %d %v", code, b)
	}
	ready.setCassandra("")
	fit = ""
	// The session answers, but every cycle fails at the configured consistency.
	quorum := errors.New("worker: list days: Cannot achieve consistency level LOCAL_QUORUM")
	for range notReadyAfterFailedCycles {
		cycles.ended(quorum)
	}
	failing := "cassandra: 3 cycles failed in a row, for 0s: worker: list days: Cannot achieve consistency level LOCAL_QUORUM"
	if code, b := get("/readyz"); code != 503 || b["reason"] != failing || b["cassandra"] != failing {
		t.Errorf("readyz with a lease and failing cycles: %d %v", code, b)
	}
	cycles.ended(nil)
	code, b := get("/readyz")
	if code != 200 || b["ready"] != true || b["epoch"] != float64(9) || b["node_index"] != float64(1) || b["worker_id"] != "w7" {
		t.Errorf("readyz with a lease: %d %v", code, b)
	}
	if left, _ := b["lease_left_ms"].(float64); left <= 0 || left > 60_000 {
		t.Errorf("lease_left_ms = %v, want within (0, 60000]", b["lease_left_ms"])
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(metrics), "retryring_probe_total 0") {
		t.Errorf("metrics: %d\n%s", resp.StatusCode, metrics)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("unknown route: %d, want 404", code)
	}
	resp, err = http.Post(srv.URL+"/readyz", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
	}
}

// TestWorkerRetryPolicyFlags: a policy file the worker cannot use stops it before it connects to
// anything, with an error that names the file's line; so do --max-attempts (flag or environment)
// beside --retry-policy, which the file would silently override, and a negative --max-rate.
func TestWorkerRetryPolicyFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bad := write("bad.yaml", "default:\n  max_attempts: 3\nPayment:\n  max_atempts: 5\n")
	good := write("good.yaml", "default:\n  max_attempts: 3\n")
	run := func(args ...string) error {
		cmd := newRootCommand()
		cmd.SetArgs(append([]string{"worker", "--http-addr", "", "--cassandra", "127.0.0.1:1"}, args...))
		return cmd.Execute()
	}
	if err := run("--retry-policy", bad); err == nil || !strings.Contains(err.Error(), bad+":4:") || !strings.Contains(err.Error(), "max_atempts") {
		t.Errorf("bad policy file: %v; want an error naming %s:4 and the key", err, bad)
	}
	if err := run("--retry-policy", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing policy file: %v", err)
	}
	if err := run("--retry-policy", good, "--max-attempts", "4"); err == nil || !strings.Contains(err.Error(), "set max_attempts in "+good) {
		t.Errorf("--max-attempts with --retry-policy: %v; want to be told to set max_attempts in the file", err)
	}
	if err := run("--max-rate", "-1"); err == nil || !strings.Contains(err.Error(), "max rate -1") {
		t.Errorf("--max-rate -1: %v; want it refused before connecting", err)
	}
	t.Setenv("RETRYRING_MAX_ATTEMPTS", "4")
	if err := run("--retry-policy", good); err == nil || !strings.Contains(err.Error(), "--max-attempts cannot be combined") {
		t.Errorf("RETRYRING_MAX_ATTEMPTS with --retry-policy: %v", err)
	}
}

// TestWorkerWaitsForTheSchemaOnAKeyspaceWithoutThePerStateMarkerCells: on a keyspace the release
// before the per-state marker cells made, a worker would write IN_PROGRESS and COMMITTED into
// cells that are not there; it does not work there. It stays up, not ready, and /readyz says in
// one line what is missing and the command to run.
func TestWorkerWaitsForTheSchemaOnAKeyspaceWithoutThePerStateMarkerCells(t *testing.T) {
	ks := cassandratest.KeyspaceFromFixture(t, filepath.Join("..", "..", "cassandra", "testdata", "schema-70c1d4d.cql"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWorker(t, "w-upgrade", "--cassandra", cassandratest.Addr(), "--keyspace", ks, "--coordinators", "127.0.0.1:1")
	b := w.readyz(ctx, "503 naming the schema", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(reason, "schema")
	})
	reason := b["reason"].(string)
	if !strings.Contains(reason, "retryring schema apply") || !strings.Contains(reason, "es_execution_markers.committed_by") || strings.Contains(reason, "\n") {
		t.Fatalf("/readyz on the keyspace before the upgrade: %q; want one line naming the missing columns and `retryring schema apply`", reason)
	}
	if code, _ := w.get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d, want 200: the worker stays up", code)
	}
}

// trustedClock is the verdict of a clock within the bound.
func trustedClock() clockcheck.Status {
	return clockcheck.Status{Trusted: true, Measured: true, Limit: time.Second}
}
