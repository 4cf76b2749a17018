package coordinator

import (
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/lease"
)

// TestMaxConnectionsClosesTheExtraOnesAtOnce: beyond --max-connections an accepted connection is
// closed before anything is read from it, and counted; the ones within keep working, and a place
// freed is taken again.
func TestMaxConnectionsClosesTheExtraOnesAtOnce(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.MaxConnections = 2 })
	n := c.leader()
	a := dialRaw(t, n.RSocketAddr())
	a.send(validSetup("a"))
	b := dialRaw(t, n.RSocketAddr())
	b.send(validSetup("b"))
	eventually(t, 5*time.Second, "two connections registered", func() bool { return len(n.conns.snapshot()) == 2 })

	extra := dialRaw(t, n.RSocketAddr())
	if !extra.closedWithin(5 * time.Second) {
		t.Fatal("the connection over the cap stayed open")
	}
	if got := refusals(n, refusedConnections); got != 1 {
		t.Errorf("connections refused %d, want 1", got)
	}
	a.send(requestStreamFrame(1, lease.RouteLeases, []byte(`{}`)))
	if _, err := a.next(5 * time.Second); err != nil {
		t.Fatalf("a connection within the cap got no element: %v", err)
	}
	_ = b.Close()
	eventually(t, 5*time.Second, "a place freed", func() bool {
		c := dialRaw(t, n.RSocketAddr())
		c.send(validSetup("c"))
		ok := !c.closedWithin(300 * time.Millisecond)
		_ = c.Close()
		return ok
	})
}

// TestSetupRateAnswersBusyWithAHint: beyond --max-setups-per-second (burst one second's worth) a
// SETUP is REJECTED_SETUP busy with retry_after_ms, counted; refused tokens do not spend the budget.
func TestSetupRateAnswersBusyWithAHint(t *testing.T) {
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders))
	// 0.01 per second with a burst of 1: the first admitted SETUP takes the budget for 100 s.
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.MaxSetupsPerSecond = 0.01
		cfg.WorkerTokensFile, cfg.ClusterSecretFile = filePath(dir, "workers.yaml"), filePath(dir, "secret")
	})
	n := c.leader()
	// Unauthenticated SETUPs first: refused as unauthorized, they spend nothing.
	for range 3 {
		expectRejected(t, rawSetup(t, n.RSocketAddr(), "x", testRing, ""), lease.CodeUnauthorized)
	}
	first := rawSetup(t, n.RSocketAddr(), "w1", testRing, tokOrders)
	if f, err := first.next(5 * time.Second); err != nil || f.Header().Type() != core.FrameTypePayload {
		t.Fatalf("the first SETUP within the budget: %v", err)
	}
	we := expectRejected(t, rawSetup(t, n.RSocketAddr(), "w2", testRing, tokOrders), lease.CodeBusy)
	if we.RetryAfterMs < minBusyHint.Milliseconds() || we.RetryAfterMs > maxBusyHint.Milliseconds() {
		t.Errorf("retry_after_ms %d outside [%v, %v]", we.RetryAfterMs, minBusyHint, maxBusyHint)
	}
	if got := refusals(n, refusedSetupRate); got != 1 {
		t.Errorf("setup_rate refusals %d, want 1", got)
	}
	if got := refusals(n, refusedUnauthorized); got != 3 {
		t.Errorf("unauthorized refusals %d, want 3", got)
	}
}

// TestStreamsPerRingAnswersBusy: beyond --max-streams-per-ring a ring.leases request is answered
// busy; another ring is not affected, and the place comes back when a stream ends.
func TestStreamsPerRingAnswersBusy(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.MaxStreamsPerRing = 1 })
	n := c.leader()
	a := rawSetup(t, n.RSocketAddr(), "a", testRing, "")
	if _, err := a.next(5 * time.Second); err != nil {
		t.Fatalf("the first stream: %v", err)
	}
	b := rawSetup(t, n.RSocketAddr(), "b", testRing, "")
	if we := b.wireErrorFrame(core.ErrorCodeApplicationError); we.Code != lease.CodeBusy || we.RetryAfterMs <= 0 {
		t.Fatalf("the second stream of the ring: %+v, want busy with retry_after_ms", we)
	}
	other := rawSetup(t, n.RSocketAddr(), "o", otherRing, "")
	if f, err := other.next(5 * time.Second); err != nil || f.Header().Type() != core.FrameTypePayload {
		t.Fatalf("a stream of another ring: %v", err)
	}
	if got := refusals(n, refusedStreams); got != 1 {
		t.Errorf("streams_per_ring refusals %d, want 1", got)
	}
	_ = a.Close()
	eventually(t, 10*time.Second, "the place of the closed stream is free", func() bool {
		b.send(requestStreamFrame(3, lease.RouteLeases, []byte(`{}`)))
		f, err := b.next(2 * time.Second)
		if err != nil {
			t.Fatalf("connection b: %v", err)
		}
		_, ok := f.(*framing.PayloadFrame)
		return ok
	})
}

// TestSlowOrLargeSetupIsClosed: a client that trickles bytes (never silent long enough for the
// silence timeout) is closed at the setup timeout; one that announces a huge frame is closed once
// it sent more than 64 KiB without a SETUP. Both are counted; neither costs a worker anything.
func TestSlowOrLargeSetupIsClosed(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.SetupTimeout = 300 * time.Millisecond })
	n := c.leader()

	slow := dialRaw(t, n.RSocketAddr())
	frame := validSetup("slow")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for _, b := range frame {
			if _, err := slow.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // below the 750 ms silence timeout
		}
	}()
	if !slow.closedWithin(20 * time.Second) {
		t.Fatal("a SETUP trickled byte by byte kept its connection")
	}
	_ = slow.Close()
	<-closed

	big := dialRaw(t, n.RSocketAddr())
	big.send([]byte{0xff, 0xff, 0xff}) // a frame of 16 MiB announced
	chunk := make([]byte, 16<<10)
	for range 8 {
		if _, err := big.Write(chunk); err != nil {
			break
		}
	}
	if !big.closedWithin(10 * time.Second) {
		t.Fatal("a connection that sent 128 KiB without a SETUP stayed open")
	}
	eventually(t, 5*time.Second, "both counted", func() bool {
		return refusals(n, refusedSetupTimeout) == 1 && refusals(n, refusedSetupTooLarge) == 1
	})
	ok := rawSetup(t, n.RSocketAddr(), "fine", testRing, "")
	if _, err := ok.next(5 * time.Second); err != nil {
		t.Fatalf("a worker after them: %v", err)
	}
}
