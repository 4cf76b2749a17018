package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/clocktest"
)

// lockedBuffer is the run's output, written by the loop and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitOutput waits until the output contains s (bounded: a test, not a timing).
func waitOutput(t *testing.T, out *lockedBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", s, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// call sends the downstream one call of transaction id, as a worker would, and returns the answer.
func call(t *testing.T, ds *downstream.Server, id string) int {
	t.Helper()
	body, _ := json.Marshal(downstream.Request{TransactionID: id, ServiceName: "orders", Region: "local", Cluster: "demo", InstanceID: "pod", ImplType: "PaymentStep"})
	req, err := http.NewRequest(http.MethodPost, ds.URL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(downstream.IdempotencyHeader, id+":PaymentStep")
	req.Header.Set(downstream.AttemptHeader, "1")
	req.Header.Set(downstream.WorkerHeader, "w1")
	req.Header.Set(downstream.LeaseEpochHeader, "1")
	req.Header.Set(downstream.WindowHeader, "2026-12-03/600")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOutageLastsUntilCallsWereRefused drives the demo's loop on a manual clock with no worker
// at all: the workers are late (as when a kill and an election kept them away in CI). The first
// window opens and Duration503 passes, and much more, with no call: the downstream must still be
// down, or the outage would be over before it refused anything. Calls then come; it recovers
// once it has refused outageRefusals of them and Duration503 has passed since the first.
func TestOutageLastsUntilCallsWereRefused(t *testing.T) {
	s := cassandratest.Session(t)
	ks := cassandratest.NewKeyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(time.Now())
	cfg := Config{Keyspace: ks, Count: 20, Instances: 1, Backdate: 3 * time.Minute, Duration503: time.Second,
		NoFaults: true, NoReplay: true, Refresh: 5 * time.Millisecond, Timeout: time.Hour, Display: DisplayPlain, Now: clk.Now}.withDefaults()
	ds, err := downstream.Start(downstream.Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ds.SetUnavailable(true) // as startFleet does
	out := &lockedBuffer{}
	r := &runner{cfg: cfg, out: out, started: clk.Now(), cluster: &proc.Cluster{Downstream: ds}, drained: make(chan struct{})}
	r.screen = newScreen(out, DisplayPlain, r.started)
	r.faults = newFaults(cfg, r.event, r.drained)
	if r.store, err = cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: cfg.Ring, WindowMinutes: cfg.WindowMinutes}); err != nil {
		t.Fatal(err)
	}
	r.insp = newInspector(r.store, cfg.MaxClockOffset, r.now)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.drive(runCtx)
		done <- err
	}()
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()
	waitOutput(t, out, "burst recorded")
	// The window is open (the burst is backdated): a minute passes, tick by tick, and no worker calls.
	for range 12 {
		clk.Advance(5 * time.Second)
		waitOutput(t, out, "["+clock(clk.Now().Sub(r.started))+"]")
	}
	if strings.Contains(out.String(), "downstream recovered") {
		t.Fatalf("the downstream recovered before it refused any call; want it down until it refused %d", outageRefusals)
	}
	for i := range outageRefusals {
		if got := call(t, ds, fmt.Sprintf("tx-%d", i)); got != http.StatusServiceUnavailable {
			t.Fatalf("call %d during the outage: %d, want 503", i, got)
		}
	}
	clk.Advance(cfg.Duration503)
	waitOutput(t, out, fmt.Sprintf("downstream recovered after refusing %d calls in 1s", outageRefusals))
	if got := call(t, ds, "tx-after"); got != http.StatusOK {
		t.Fatalf("a call after the recovery: %d, want 200", got)
	}
}
