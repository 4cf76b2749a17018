package ringtest

import (
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// element is a lease of epoch whose demand was sent at sent (seconds after the clock's start).
func element(c *clocktest.Manual, epoch uint64, sentAgo float64, ttl float64, index int, rs ...lease.Range) lease.Lease {
	return lease.Lease{
		Epoch: epoch, NodeIndex: index, Ranges: lease.Normalize(rs), TTL: secs(ttl),
		ValidFrom: c.Now().Add(-secs(sentAgo)),
	}
}

func TestRecorderCoalescesRenewalsAndClosesAtExpiry(t *testing.T) {
	c := clocktest.New(time.Unix(1000, 0))
	r := NewRecorder(c.Now)
	r.Install("A", "1", element(c, 1, 0, 3, 0, lease.FullRing))
	c.Advance(time.Second)
	r.Install("A", "1", element(c, 1, 0, 3, 0, lease.FullRing)) // renewal: one interval
	c.Advance(5 * time.Second)                                  // no renewal: expired at 4 s
	r.Install("A", "1", element(c, 1, 0.5, 3, 0, lease.FullRing))
	ivs := r.Intervals()
	if len(ivs) != 2 {
		t.Fatalf("intervals = %v, want two", ivs)
	}
	if ivs[0].From != 0 || ivs[0].To != secs(4) || !ivs[0].Node0 {
		t.Fatalf("first = %v, want [0s, 4s) Node-0", ivs[0])
	}
	if ivs[1].From != secs(6) || ivs[1].To != secs(8.5) {
		t.Fatalf("second = %v, want [6s, 8.5s): still held, ending at its expiry", ivs[1])
	}
}

func TestRecorderSwitchesAtTheNextInstall(t *testing.T) {
	c := clocktest.New(time.Unix(1000, 0))
	r := NewRecorder(c.Now)
	r.Install("A", "1", element(c, 1, 0, 3, 0, lease.FullRing))
	c.Advance(time.Second)
	r.Install("A", "1", element(c, 2, 0, 3, 0, half[0])) // shrinks: the second half ends now
	c.Advance(time.Second)
	r.Install("A", "1", element(c, 1, 0, 3, 0, lease.FullRing)) // an older epoch: ignored, as the guard does
	ivs := r.Intervals()
	if len(ivs) != 2 || ivs[0].To != secs(1) || ivs[1].From != secs(1) || ivs[1].Epoch != 2 || ivs[1].To != secs(4) {
		t.Fatalf("intervals = %v", ivs)
	}
}

func TestRecorderIgnoresAnElementExpiredOnArrival(t *testing.T) {
	c := clocktest.New(time.Unix(1000, 0))
	r := NewRecorder(c.Now)
	r.Install("A", "1", element(c, 1, 0, 3, 1, half[1]))
	c.Advance(time.Second)
	r.Install("A", "1", element(c, 1, 4, 3, 1, half[1])) // demand sent 4 s ago: useless, and it replaced the good one
	ivs := r.Intervals()
	if len(ivs) != 1 || ivs[0].To != secs(1) || ivs[0].Node0 {
		t.Fatalf("intervals = %v, want [0s, 1s) only", ivs)
	}
}

func TestRecorderEndStopsTheHolder(t *testing.T) {
	c := clocktest.New(time.Unix(1000, 0))
	r := NewRecorder(c.Now)
	r.Install("A", "1", element(c, 1, 0, 3, 0, lease.FullRing))
	c.Advance(time.Second)
	r.End("A", "1")
	c.Advance(time.Second)
	r.Install("A", "1", element(c, 2, 0, 3, 0, lease.FullRing)) // a callback racing the crash
	r.Install("A", "2", element(c, 3, 0, 3, 0, lease.FullRing)) // the next incarnation is another holder
	ivs := r.Intervals()
	if len(ivs) != 2 || ivs[0].Holder() != "A#1" || ivs[0].To != secs(1) || ivs[1].Holder() != "A#2" {
		t.Fatalf("intervals = %v", ivs)
	}
	if h := r.Holding(); len(h) != 1 || h["A#2"].Epoch != 3 {
		t.Fatalf("holding = %v", h)
	}
}

func TestRecorderWindowsEndAtFaults(t *testing.T) {
	c := clocktest.New(time.Unix(1000, 0))
	r := NewRecorder(c.Now)
	c.Advance(time.Second)
	r.Note(Event{Kind: EventSettled})
	c.Advance(time.Second)
	r.Note(Event{Kind: EventSettled}) // same window
	c.Advance(time.Second)
	r.Note(Event{Kind: EventWorkerStopped, Fault: true})
	c.Advance(time.Second)
	r.Note(Event{Kind: EventLeader}) // not a fault: no window starts here
	c.Advance(time.Second)
	r.Note(Event{Kind: EventSettled})
	c.Advance(time.Second)
	w := r.History().Settled
	if len(w) != 2 || w[0] != (Window{From: secs(1), To: secs(3)}) || w[1] != (Window{From: secs(5), To: secs(6)}) {
		t.Fatalf("windows = %v", w)
	}
}
