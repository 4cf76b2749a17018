package main

import (
	"testing"
	"time"

	"github.com/retryring/retryring/bench/leaseprobe/event"
	"github.com/retryring/retryring/lease"
)

func rec(at, expires int64, rs ...lease.Range) leaseRec {
	return leaseRec{at: at, expires: expires, ranges: lease.Normalize(rs)}
}

var halves = lease.Split(2)

func TestValidAtUsesTheLatestInstallUntilItsExpiry(t *testing.T) {
	recs := []leaseRec{rec(10, 100, halves[0]), rec(50, 60, halves[1])}
	if _, ok := validAt(recs, 5); ok {
		t.Fatal("valid before the first install")
	}
	if r, ok := validAt(recs, 20); !ok || !r.ranges.Equal(lease.Ranges{halves[0]}) {
		t.Fatalf("at 20: %v %v", r, ok)
	}
	// The install at 50 replaced the first lease even though the first would have lasted longer.
	if _, ok := validAt(recs, 70); ok {
		t.Fatal("the replaced lease counted after the newer one expired")
	}
}

func TestFirstCoveredIsTheInstallThatCompletesTheRing(t *testing.T) {
	h := map[string][]leaseRec{
		"a": {rec(0, 1000, halves[0])},
		"b": {rec(300, 1000, halves[1]), rec(400, 1000, halves[1])},
	}
	full := lease.Ranges{lease.FullRing}
	at, ok := firstCovered(h, 100, 2000, full)
	if !ok || at != 300 {
		t.Fatalf("got %d %v, want 300", at, ok)
	}
	if at, ok := firstCovered(h, 350, 2000, full); !ok || at != 350 {
		t.Fatalf("already covered at from: got %d %v", at, ok)
	}
	if _, ok := firstCovered(h, 100, 299, full); ok {
		t.Fatal("covered before b's install")
	}
	// An install that arrives after a's lease expired does not complete the ring.
	h["a"] = []leaseRec{rec(0, 200, halves[0])}
	if _, ok := firstCovered(h, 100, 2000, full); ok {
		t.Fatal("an expired lease counted")
	}
}

func TestFirstGapFindsAnExpiryBeforeTheNextInstall(t *testing.T) {
	recs := []leaseRec{rec(0, 300, halves[0]), rec(100, 400, halves[0]), rec(450, 750, halves[0])}
	if _, gap := firstGap(recs, 50, 350); gap {
		t.Fatal("gap while renewals came in time")
	}
	if at, gap := firstGap(recs, 50, 500); !gap || at != 400 {
		t.Fatalf("got %d %v, want a gap at 400", at, gap)
	}
	if at, gap := firstGap(recs, 420, 500); !gap || at != 420 {
		t.Fatalf("got %d %v, want a gap at the start", at, gap)
	}
}

func TestLeaseRecsKeepsOneIncarnationsLeases(t *testing.T) {
	evs := []event.Event{
		event.FromLease(lease.Lease{Epoch: 1, Ranges: lease.Ranges{halves[0]}, TTL: time.Second, ValidFrom: time.Unix(0, 5)}, time.Unix(0, 10)),
		{Kind: event.Connected, AtNs: 11, Incarnation: "a"},
	}
	evs[0].Incarnation = "a"
	other := evs[0]
	other.Incarnation = "b"
	evs = append(evs, other)
	recs := leaseRecs(evs, "a")
	if len(recs) != 1 || recs[0].at != 10 || recs[0].expires != 5+int64(time.Second) || recs[0].epoch != 1 {
		t.Fatalf("got %+v", recs)
	}
}

func TestSummarizeTakesTheNearestRankForP99(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds, 1)
	if s.N != 20 || s.Timeouts != 1 || s.Min != time.Millisecond || s.Max != 20*time.Millisecond ||
		s.P99 != 20*time.Millisecond || s.Median != 10500*time.Microsecond {
		t.Fatalf("got %+v", s)
	}
}
