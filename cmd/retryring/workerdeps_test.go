package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/ringtest/faultproxy"
	"github.com/retryring/retryring/window"
)

// freeAddr is a loopback address nothing listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startedWorker is a `retryring worker` command run in this process.
type startedWorker struct {
	t        *testing.T
	httpAddr string
	id       string
}

// startWorker runs the worker command with args (plus --http-addr and --worker-id) until the
// test ends; the command must end without an error.
func startWorker(t *testing.T, id string, args ...string) *startedWorker {
	t.Helper()
	w := &startedWorker{t: t, httpAddr: freeAddr(t), id: id}
	cmd := workerCommand(&workerOptions{})
	cmd.SetArgs(append([]string{"--http-addr", w.httpAddr, "--worker-id", id, "--shutdown-timeout", "5s"}, args...))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker %s: %v", id, err)
		}
	})
	return w
}

// get answers GET path on the worker's HTTP address: the status and the JSON body (0 while the
// port does not answer).
func (w *startedWorker) get(path string) (int, map[string]any) {
	resp, err := http.Get("http://" + w.httpAddr + path)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var b map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&b)
	return resp.StatusCode, b
}

// readyz polls /readyz until ok accepts its answer, and returns the body.
func (w *startedWorker) readyz(ctx context.Context, what string, ok func(code int, reason string) bool) map[string]any {
	w.t.Helper()
	var last map[string]any
	for {
		code, b := w.get("/readyz")
		reason, _ := b["reason"].(string)
		if code != 0 && ok(code, reason) {
			return b
		}
		last = b
		if ctx.Err() != nil {
			w.t.Fatalf("worker %s: gave up waiting for /readyz %s; last answer %v", w.id, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ringMembers returns the members of the ring that are not departed, by worker id, as the
// coordinator at httpAddr sees them.
func ringMembers(httpAddr string) map[string]admin.MemberView {
	resp, err := http.Get("http://" + httpAddr + "/v1/ring")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var v admin.RingView
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return nil
	}
	out := map[string]admin.MemberView{}
	for _, r := range v.Rings {
		for _, m := range r.Members {
			if m.State != admin.MemberDeparted {
				out[m.WorkerID] = m
			}
		}
	}
	return out
}

// eventually polls ok until it holds or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordWaiting records one failure into a readable window of ks for the default ring.
func recordWaiting(ctx context.Context, t *testing.T, ks, txID string) {
	t.Helper()
	store, err := cassandra.NewStore(cassandratest.Session(t), cassandra.StoreConfig{Keyspace: ks,
		Ring: lease.RingKey{Region: "local", Cluster: "default", Service: "orders"}, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recorder.New(store, recorder.Config{InstanceID: "pod-1", UncheckedClock: true})
	if err != nil {
		t.Fatal(err)
	}
	past, err := window.Of(time.Now().Add(-10*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordAt(ctx, past, recorder.Failure{TransactionID: txID, ImplType: "Payment"}); err != nil {
		t.Fatal(err)
	}
}

// executions is a downstream that records the transaction ids it was sent.
type executions struct {
	mu  sync.Mutex
	ids []string
	srv *httptest.Server
}

func newExecutions(t *testing.T) *executions {
	e := &executions{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var req struct {
			TransactionID string `json:"transaction_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		e.mu.Lock()
		e.ids = append(e.ids, req.TransactionID)
		e.mu.Unlock()
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *executions) has(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.ids {
		if x == id {
			return true
		}
	}
	return false
}

// schemaKeyspace is a new keyspace with the current schema.
func schemaKeyspace(ctx context.Context, t *testing.T) string {
	t.Helper()
	ks := cassandratest.NewKeyspace(t)
	if err := cassandra.ApplySchema(ctx, cassandratest.Session(t), ks, cassandra.Replication{}); err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestWorkerWaitsForCassandra: with Cassandra out of reach (a proxy in front of the real one that
// holds every connection without an answer, as a black-holed network does), the worker serves
// /healthz at once and /readyz 503 saying Cassandra is unreachable, and stays up; when the proxy
// lets Cassandra through it becomes ready, joins its ring and drains a failure that was waiting.
// (A proxy that resets connections would read as a node that wants TLS: cassandra.ConnectError
// says so for a connection closed at the first CQL frame.)
func TestWorkerWaitsForCassandra(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ks := schemaKeyspace(ctx, t)
	recordWaiting(ctx, t, ks, "tx-waiting")
	node := startCoordinatorNode(t)
	exec := newExecutions(t)
	proxy, err := faultproxy.Listen(cassandratest.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	proxy.Hang()

	w := startWorker(t, "w-waits", "--cassandra", proxy.Addr(), "--keyspace", ks, "--coordinators", node.RSocketAddr(),
		"--executor-url", exec.srv.URL, "--clock-check-every", "200ms", "--log-level", "warn")
	eventually(ctx, t, "/healthz 200", func() bool { code, b := w.get("/healthz"); return code == 200 && b["ok"] == true })
	b := w.readyz(ctx, "503 cassandra unreachable", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.HasPrefix(reason, "cassandra unreachable: connect to "+proxy.Addr())
	})
	if b["cassandra"] != b["reason"] || b["worker_id"] != "w-waits" {
		t.Fatalf("/readyz while Cassandra is cut off: %v", b)
	}
	time.Sleep(time.Second) // a few retries later: still up, still not ready, not in the ring
	if code, _ := w.get("/healthz"); code != 200 {
		t.Fatalf("/healthz %d after the retries, want 200", code)
	}
	if _, in := ringMembers(node.HTTPAddr())["w-waits"]; in {
		t.Fatal("the worker joined its ring before Cassandra was up")
	}

	proxy.Heal()
	w.readyz(ctx, "200", func(code int, _ string) bool { return code == http.StatusOK })
	eventually(ctx, t, "the waiting failure executed", func() bool { return exec.has("tx-waiting") })
	resp, err := http.Get("http://" + w.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text bytes.Buffer
	_, _ = text.ReadFrom(resp.Body)
	for _, want := range []string{"retryring_worker_cassandra_connect_attempts_total ", "retryring_worker_cassandra_connect_failures_total ", "retryring_worker_cassandra_reachable 1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text.String(), "retryring_worker_cassandra_connect_failures_total 0") {
		t.Error("no failed attempt counted while Cassandra was cut off")
	}
}

// syncBuffer is a log sink the worker writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWorkerReportsARefusedTokenBeforeCassandra: a coordinator that requires worker tokens
// refuses the worker's; with Cassandra unreachable (a closed port) the worker says both on
// /readyz, and the refusal in its log, before it ever reached Cassandra and without joining. Once
// the coordinator's file admits the token, the refusal leaves /readyz and the log says so.
func TestWorkerReportsARefusedTokenBeforeCassandra(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokens := write("tokens.yaml", auth.EntryLine("local/default/orders", "the-right-token-0123456789", "orders")+"\n")
	secret := write("secret", "cluster-secret-0123456789abcdef0123456789\n")
	node := startConfiguredCoordinator(t, func(c *coordinator.Config) { c.WorkerTokensFile, c.ClusterSecretFile = tokens, secret })
	wrong := write("token", "a-mistyped-token-0123456789\n")

	logs := &syncBuffer{}
	was := stderr
	stderr = logs
	t.Cleanup(func() { stderr = was })
	cassandraAddr := freeAddr(t)
	w := startWorker(t, "w-token", "--cassandra", cassandraAddr, "--coordinators", node.RSocketAddr(), "--token-file", wrong)
	b := w.readyz(ctx, "503 with the refusal", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(reason, "unauthorized")
	})
	coord, _ := b["coordinator"].(string)
	if !strings.HasPrefix(coord, "the coordinator at "+node.RSocketAddr()+" refused this worker's credentials: ") ||
		!strings.Contains(coord, "the token is not valid for ring local/default/orders") {
		t.Fatalf("/readyz coordinator reason %q; want the refusal of the token for the ring", coord)
	}
	if cass, _ := b["cassandra"].(string); !strings.HasPrefix(cass, "cassandra unreachable: connect to "+cassandraAddr) {
		t.Fatalf("/readyz cassandra reason %q; want it unreachable at %s", cass, cassandraAddr)
	}
	eventually(ctx, t, "the refusal in the log", func() bool {
		return strings.Contains(logs.String(), "a coordinator refused this worker's credentials: fix the token or certificate")
	})
	if members := ringMembers(node.HTTPAddr()); len(members) != 0 {
		t.Fatalf("the credentials check joined the ring: %v", members)
	}

	// The operator adds the worker's token to the coordinator's file (re-read every second): the
	// next check is admitted, and /readyz is left with Cassandra alone.
	write("tokens.yaml", auth.EntryLine("local/default/orders", "a-mistyped-token-0123456789", "orders")+"\n")
	b = w.readyz(ctx, "503 with Cassandra's reason alone", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.HasPrefix(reason, "cassandra unreachable: ") && !strings.Contains(reason, "credentials")
	})
	if _, ok := b["coordinator"]; ok {
		t.Fatalf("/readyz still names a refusal after the token was admitted: %v", b)
	}
	eventually(ctx, t, "the admission in the log", func() bool {
		return strings.Contains(logs.String(), "a coordinator admits this worker's credentials")
	})
	if members := ringMembers(node.HTTPAddr()); len(members) != 0 {
		t.Fatalf("the admitted check joined the ring: %v", members)
	}
}

// TestWorkerGivesItsRangesBackWhenCassandraIsLost: two workers share a ring; one reaches
// Cassandra through a proxy that the test cuts. It stays up and answers /readyz 503 with the
// reason, and after --cassandra-lost-after leaves the ring: the other worker holds every range.
// When the proxy lets Cassandra through again it rejoins and is ready.
func TestWorkerGivesItsRangesBackWhenCassandraIsLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ks := schemaKeyspace(ctx, t)
	node := startCoordinatorNode(t)
	exec := newExecutions(t)
	proxy, err := faultproxy.Listen(cassandraTestAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	logs := &syncBuffer{}
	was := stderr
	stderr = logs
	t.Cleanup(func() { stderr = was })
	// The clock's estimate is trusted for 3 × 10 s: the cut worker leaves for Cassandra's sake
	// (after 2 s), not because its clock check went stale.
	common := []string{"--keyspace", ks, "--coordinators", node.RSocketAddr(), "--executor-url", exec.srv.URL,
		"--clock-check-every", "10s", "--log-level", "info"}
	cut := startWorker(t, "w-cut", append([]string{"--cassandra", proxy.Addr(), "--cassandra-lost-after", "2s"}, common...)...)
	stays := startWorker(t, "w-stays", append([]string{"--cassandra", cassandratest.Addr()}, common...)...)
	both := func() bool {
		m := ringMembers(node.HTTPAddr())
		return len(m["w-cut"].Ranges) > 0 && len(m["w-stays"].Ranges) > 0
	}
	eventually(ctx, t, "both workers holding ranges", both)
	cut.readyz(ctx, "200", func(code int, _ string) bool { return code == http.StatusOK })

	proxy.Cut()
	cutAt := time.Now()
	cut.readyz(ctx, "503 cassandra unreachable", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.HasPrefix(reason, "cassandra unreachable: ")
	})
	eventually(ctx, t, "w-cut out of the ring and w-stays holding every range", func() bool {
		m := ringMembers(node.HTTPAddr())
		_, in := m["w-cut"]
		return !in && coversRing(m["w-stays"].Ranges)
	})
	t.Logf("w-cut out of the ring %v after the cut", time.Since(cutAt).Round(time.Millisecond))
	if code, _ := cut.get("/healthz"); code != 200 {
		t.Fatalf("the cut worker's /healthz: %d, want 200 (it stays up)", code)
	}
	var left bool
	for _, line := range strings.Split(logs.String(), "\n") {
		left = left || strings.Contains(line, `"worker_id":"w-cut"`) && strings.Contains(line, `"message":"leaving the ring"`) &&
			strings.Contains(line, "(for longer than --cassandra-lost-after 2s)")
	}
	if !left {
		t.Fatalf("no line of w-cut leaving the ring for Cassandra's sake; log:\n%s", logs.String())
	}
	if code, _ := stays.get("/readyz"); code != http.StatusOK {
		t.Fatalf("the other worker's /readyz: %d, want 200", code)
	}

	proxy.Heal()
	healAt := time.Now()
	eventually(ctx, t, "w-cut back in the ring with ranges", both)
	t.Logf("w-cut back in the ring %v after the heal", time.Since(healAt).Round(time.Millisecond))
	cut.readyz(ctx, "200 after the rejoin", func(code int, _ string) bool { return code == http.StatusOK })
}

// cassandraTestAddr is the tests' Cassandra; it fails the test when none answers.
func cassandraTestAddr(t *testing.T) string {
	t.Helper()
	cassandratest.Session(t) // fails, never skips, without Cassandra
	return cassandratest.Addr()
}

// coversRing reports whether ranges cover the whole token ring.
func coversRing(ranges []lease.WireRange) bool {
	rs, err := lease.DecodeRanges(ranges)
	if err != nil || len(rs) == 0 {
		return false
	}
	return lease.Normalize(rs).Equal(lease.Ranges{lease.FullRing})
}
