package executor

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/worker"
)

// stallingClock is the fence's clock, set ahead to play a worker that stalled after its guard's
// check: the request's deadline has passed by the time its first byte is to be written.
type stallingClock struct{ ahead atomic.Int64 }

func (c *stallingClock) now() time.Time        { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *stallingClock) stall(d time.Duration) { c.ahead.Store(int64(d)) }
func countingServer(hits *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
}

// TestFenceStopsARequestPastItsDeadline: a request whose deadline has passed when it is written
// never reaches the server, on a fresh connection and on a reused one, while the same requests
// go through when the worker did not stall.
func TestFenceStopsARequestPastItsDeadline(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(countingServer(&hits))
	defer srv.Close()
	clock := &stallingClock{}
	ex, err := NewHTTP(HTTPConfig{URL: srv.URL, now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	run := func() worker.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return ex.Execute(ctx, task())
	}

	// A fresh connection, stalled past the deadline.
	clock.stall(time.Minute)
	if out := run(); out.Kind != worker.NotSent || !errors.Is(out.Err, ErrFenced) {
		t.Errorf("stalled on a fresh connection: %+v, want NotSent with ErrFenced", out)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server received %d requests sent past their deadline", n)
	}

	// Not stalled: sent; the connection stays open for the next request.
	clock.stall(0)
	if out := run(); out.Kind != worker.Done {
		t.Fatalf("not stalled: %+v, want Done", out)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("server hits %d after one request that was sent", n)
	}

	// Stalled again, on the kept-alive connection: Go's transport may retry a request with an
	// Idempotency-Key on another connection when nothing was written; none of them may send it.
	clock.stall(time.Minute)
	if out := run(); out.Kind != worker.NotSent || !errors.Is(out.Err, ErrFenced) {
		t.Errorf("stalled on a reused connection: %+v, want NotSent with ErrFenced", out)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("server hits %d: a request past its deadline went through a reused connection", n)
	}

	// Without a deadline in the context there is nothing to fence, also on a connection kept
	// alive from a request whose deadline has passed since.
	clock.stall(0)
	if out := run(); out.Kind != worker.Done {
		t.Fatalf("not stalled: %+v, want Done", out)
	}
	clock.stall(time.Hour)
	if out := ex.Execute(context.Background(), task()); out.Kind != worker.Done {
		t.Errorf("no deadline: %+v, want Done", out)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("server hits %d, want 3", n)
	}
}

// TestFenceHoldsOverTLS: with an https URL the transport layers TLS over the fenced connection;
// the fence still refuses a stalled request, and lets a timely one through.
func TestFenceHoldsOverTLS(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewTLSServer(countingServer(&hits))
	defer srv.Close()
	clock := &stallingClock{}
	ex, err := NewHTTP(HTTPConfig{URL: srv.URL, now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	// Trust the test server's certificate; everything else is the stock fenced transport.
	ex.client.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	run := func() worker.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return ex.Execute(ctx, task())
	}
	if out := run(); out.Kind != worker.Done || hits.Load() != 1 {
		t.Fatalf("not stalled over TLS: %+v, %d hits; want Done, 1", out, hits.Load())
	}
	clock.stall(time.Minute)
	if out := run(); out.Kind != worker.NotSent || !errors.Is(out.Err, ErrFenced) {
		t.Errorf("stalled over TLS: %+v, want NotSent with ErrFenced", out)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("server hits %d: a stalled request went through over TLS", n)
	}
}
