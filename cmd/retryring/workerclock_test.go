package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/window"
)

// skewedClock is the system clock moved by an offset the test changes.
type skewedClock struct{ by atomic.Int64 }

func (c *skewedClock) Now() time.Time { return time.Now().Add(time.Duration(c.by.Load())) }

func (c *skewedClock) skew(d time.Duration) { c.by.Store(int64(d)) }

// TestWorkerOutOfTheRingWhileItsClockIsUntrusted runs the worker command against the real
// Cassandra and a real coordinator, with its clock injected. Started 3 s ahead of Cassandra (a
// 2 s bound allows 1 s per process), it measures, stays out of the ring and answers /readyz 503
// naming the offset and the bound. Set right, it joins and reports its offset in GET /v1/ring.
// Skewed again, it gives its ranges back at once (it is no member any more) and executes nothing,
// not even a failure waiting in a readable window; set right again, it rejoins and executes it.
func TestWorkerOutOfTheRingWhileItsClockIsUntrusted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session := cassandratest.Session(t)
	ks := cassandratest.NewKeyspace(t)
	if err := cassandra.ApplySchema(ctx, session, ks, cassandra.Replication{}); err != nil {
		t.Fatal(err)
	}
	node := startCoordinatorNode(t)
	clock := &skewedClock{}
	clock.skew(3 * time.Second)

	var mu sync.Mutex
	var executed []string
	var whileSkewed []string
	exec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TransactionID string `json:"transaction_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		executed = append(executed, req.TransactionID)
		if clock.by.Load() != 0 {
			whileSkewed = append(whileSkewed, req.TransactionID)
		}
		mu.Unlock()
	}))
	defer exec.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := l.Addr().String()
	l.Close()
	o := &workerOptions{clock: clock}
	cmd := workerCommand(o)
	cmd.SetArgs([]string{"--cassandra", cassandratest.Addr(), "--keyspace", ks, "--coordinators", node.RSocketAddr(),
		"--executor-url", exec.URL, "--http-addr", httpAddr, "--worker-id", "w-skewed", "--clock-check-every", "100ms",
		"--log-level", "warn", "--shutdown-timeout", "5s"})
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(wctx) }()
	defer func() {
		stopWorker()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()

	readyz := func() (int, map[string]any) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var b map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode, b
	}
	member := func() *admin.MemberView {
		resp, err := http.Get("http://" + node.HTTPAddr() + "/v1/ring")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var v admin.RingView
		if json.NewDecoder(resp.Body).Decode(&v) != nil {
			return nil
		}
		for _, r := range v.Rings {
			for i := range r.Members {
				if m := &r.Members[i]; m.WorkerID == "w-skewed" && m.State != admin.MemberDeparted {
					return m
				}
			}
		}
		return nil
	}
	poll := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("gave up waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	untrusted := func() {
		t.Helper()
		var body map[string]any
		poll("/readyz 503 for the clock", func() bool {
			code, b := readyz()
			body = b
			return code == http.StatusServiceUnavailable && strings.Contains(b["reason"].(string), "beyond the bound")
		})
		if r := body["reason"].(string); !strings.Contains(r, "max_clock_offset 2s allows 1s") || body["clock_offset_ms"] == nil {
			t.Fatalf("/readyz: %v; want the measured offset and the bound", body)
		}
		if off := body["clock_offset_ms"].(float64); off > -2000 || off < -4000 {
			t.Fatalf("clock_offset_ms = %v, want about -3000 (Cassandra 3 s behind this clock)", off)
		}
	}

	// Started untrusted: it measures and stays out.
	untrusted()
	if m := member(); m != nil {
		t.Fatalf("a worker whose clock is untrusted joined: %+v", m)
	}

	clock.skew(0)
	poll("/readyz 200", func() bool { code, _ := readyz(); return code == http.StatusOK })
	poll("a report with the clock", func() bool {
		m := member()
		return m != nil && m.Report != nil && m.Report.Report != nil && m.Report.Clock != nil
	})
	if c := member().Report.Clock; !c.Trusted || c.LimitUs != 1_000_000 {
		t.Fatalf("reported clock %+v, want trusted with a 1 s limit", c)
	}

	clock.skew(3 * time.Second)
	untrusted()
	poll("the ranges given back", func() bool { return member() == nil })

	// A failure waits in a readable window; the worker must leave it alone while skewed.
	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: ks, Ring: lease.RingKey{Region: "local", Cluster: "default", Service: "orders"}, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Unchecked: this test's recorder is not under test; it runs on the host's clock, Cassandra's.
	rec, err := recorder.New(store, recorder.Config{InstanceID: "pod-1", UncheckedClock: true})
	if err != nil {
		t.Fatal(err)
	}
	past, err := window.Of(time.Now().Add(-10*time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordAt(ctx, past, recorder.Failure{TransactionID: "tx-waiting", ImplType: "Payment"}); err != nil {
		t.Fatal(err)
	}
	for range 10 { // polls across about ten measurements: still out, still nothing executed
		if code, _ := readyz(); code != http.StatusServiceUnavailable || member() != nil {
			t.Fatalf("the worker came back while its clock is 3 s ahead")
		}
		time.Sleep(100 * time.Millisecond)
	}

	clock.skew(0)
	poll("the waiting failure executed after the rejoin", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(executed) > 0
	})
	if m := member(); m == nil {
		t.Fatal("the worker executed without being a member")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(whileSkewed) > 0 || len(executed) != 1 || executed[0] != "tx-waiting" {
		t.Fatalf("executed %v, of which %v while the clock was skewed; want tx-waiting once, after", executed, whileSkewed)
	}
}
