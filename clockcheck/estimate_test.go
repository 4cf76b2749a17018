package clockcheck

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

// probe simulates one query of a server whose clock is `offset` ahead of the local one: the
// request takes `out` on the wire, the answer `back`, and the server truncates its reading to ms.
func probe(host string, sent time.Time, offset, out, back time.Duration) Sample {
	serverAt := sent.Add(out).Add(offset)
	return Sample{Host: host, Sent: sent, Received: sent.Add(out + back),
		Server: serverAt.Truncate(time.Millisecond), Resolution: time.Millisecond}
}

// TestEstimateBracketsTheTrueOffset: for generated skews and asymmetric round trips (one leg up to
// 50 ms, the other near zero), the true offset always lies within Offset ± Uncertainty, and the
// estimate keeps the sample with the least round trip.
func TestEstimateBracketsTheTrueOffset(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		offset := time.Duration(r.Int64N(int64(20*time.Second))) - 10*time.Second
		var samples []Sample
		least := time.Duration(1 << 62)
		for k := range 1 + r.IntN(6) {
			out := time.Duration(r.Int64N(int64(50 * time.Millisecond)))
			back := time.Duration(r.Int64N(int64(time.Millisecond)))
			if r.IntN(2) == 0 {
				out, back = back, out
			}
			least = min(least, out+back)
			samples = append(samples, probe("h1", t0.Add(time.Duration(k)*time.Second), offset, out, back))
		}
		e, err := EstimateFrom(samples, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if d := e.Offset - offset; d > e.Uncertainty || -d > e.Uncertainty {
			t.Fatalf("case %d: true offset %v outside %v ± %v", i, offset, e.Offset, e.Uncertainty)
		}
		if want := least/2 + time.Millisecond/2; e.Uncertainty != want {
			t.Fatalf("case %d: uncertainty %v, want half the least round trip plus half the resolution, %v", i, e.Uncertainty, want)
		}
		if e.Worst() < abs(offset) {
			t.Fatalf("case %d: worst %v is below the true |offset| %v", i, e.Worst(), abs(offset))
		}
	}
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestEstimateTakesTheMedianHost: for generated clusters (3 to 9 hosts within 100 ms of each
// other, each answering a few times over asymmetric round trips) plus one host whose clock is
// seconds off, the estimate is a host of the cluster, not the outlier: the median by offset. Its
// Spread bounds how far apart the hosts truly are, so it exceeds the limit the outlier breaks; it
// counts the hosts that answered.
func TestEstimateTakesTheMedianHost(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		base := time.Duration(r.Int64N(int64(time.Second))) - 500*time.Millisecond
		n := 3 + r.IntN(7)
		truth := map[string]time.Duration{}
		for h := range n {
			truth[fmt.Sprintf("h%d", h)] = base + time.Duration(r.Int64N(int64(100*time.Millisecond)))
		}
		outlier := 3*time.Second + time.Duration(r.Int64N(int64(10*time.Second)))
		if r.IntN(2) == 0 {
			outlier = -outlier
		}
		truth["bad"] = base + outlier
		var samples []Sample
		for host, off := range truth {
			for k := range 1 + r.IntN(3) {
				out := time.Duration(r.Int64N(int64(20 * time.Millisecond)))
				samples = append(samples, probe(host, t0.Add(time.Duration(k)*time.Second), off, out, time.Millisecond))
			}
		}
		e, err := EstimateFrom(samples, t0)
		if err != nil {
			t.Fatal(err)
		}
		if e.Host == "bad" || e.Hosts != n+1 {
			t.Fatalf("case %d: estimate %+v of %d hosts, want a host of the cluster of %d", i, e, e.Hosts, n+1)
		}
		if d := e.Offset - truth[e.Host]; d > e.Uncertainty || -d > e.Uncertainty {
			t.Fatalf("case %d: host %s's true offset %v outside %v", i, e.Host, truth[e.Host], e)
		}
		lo, hi := truth["bad"], truth["bad"]
		for _, off := range truth {
			lo, hi = min(lo, off), max(hi, off)
		}
		if e.Spread < hi-lo || e.Spread <= time.Second {
			t.Fatalf("case %d: spread %v, the hosts are %v apart", i, e.Spread, hi-lo)
		}
	}
	one, err := EstimateFrom([]Sample{probe("a", t0, time.Second, time.Millisecond, time.Millisecond)}, t0)
	if err != nil || one.Spread != 0 || one.Host != "a" {
		t.Fatalf("one host: %+v (%v), want its estimate and no spread", one, err)
	}
}

// TestEstimateDropsBackwardClock: a sample across which the local clock went back says nothing;
// with no other sample there is no estimate.
func TestEstimateDropsBackwardClock(t *testing.T) {
	back := Sample{Host: "a", Sent: t0, Received: t0.Add(-time.Second), Server: t0, Resolution: time.Millisecond}
	if _, err := EstimateFrom([]Sample{back}, t0); !errors.Is(err, ErrNoSample) {
		t.Fatalf("err = %v, want ErrNoSample", err)
	}
	if _, err := EstimateFrom(nil, t0); !errors.Is(err, ErrNoSample) {
		t.Fatalf("no samples: err = %v, want ErrNoSample", err)
	}
	good := probe("a", t0, 0, time.Millisecond, time.Millisecond)
	e, err := EstimateFrom([]Sample{back, good}, t0)
	if err != nil || e.Uncertainty != 1500*time.Microsecond {
		t.Fatalf("estimate %+v (%v), want the forward sample's", e, err)
	}
}

// TestCheck: the verdict for each way a clock can be untrusted, and the boundary of the bound:
// each process gets half of max_clock_offset.
func TestCheck(t *testing.T) {
	e := func(offset, u time.Duration) Estimate {
		return Estimate{Host: "h", Offset: offset, Uncertainty: u, Hosts: 1, At: t0}
	}
	const bound, stale = 2 * time.Second, 90 * time.Second
	for _, c := range []struct {
		name     string
		est      Estimate
		measured bool
		now      time.Time
		trusted  bool
		reason   string
	}{
		{"none yet", Estimate{}, false, t0, false, "no measurement"},
		{"exactly half", e(990*time.Millisecond, 10*time.Millisecond), true, t0, true, ""},
		{"behind, just past half", e(-990*time.Millisecond, 11*time.Millisecond), true, t0, false, "beyond the bound: max_clock_offset 2s allows 1s"},
		{"ahead by 1.5s", e(1500*time.Millisecond, time.Millisecond), true, t0, false, "beyond the bound"},
		{"uncertainty alone", e(0, 1100*time.Millisecond), true, t0, false, "beyond the bound"},
		{"fresh at the limit", e(0, time.Millisecond), true, t0.Add(stale), true, ""},
		{"stale", e(0, time.Millisecond), true, t0.Add(stale + time.Millisecond), false, "more than the 1m30s it is trusted for"},
		{"clock stepped back", e(0, time.Millisecond), true, t0.Add(-time.Second), false, "went back 1s"},
	} {
		s := Check(c.est, c.measured, c.now, bound, stale)
		if s.Trusted != c.trusted || !strings.Contains(s.Reason, c.reason) || (c.trusted != (s.Reason == "")) {
			t.Errorf("%s: trusted %v reason %q; want %v and a reason with %q", c.name, s.Trusted, s.Reason, c.trusted, c.reason)
		}
		if err := s.Err(); c.trusted != (err == nil) || (err != nil && !errors.Is(err, ErrClockUntrusted)) {
			t.Errorf("%s: Err() = %v", c.name, err)
		}
	}
}

// TestCheckSeesAWallClockStep: an estimate 300 ms from Cassandra leaves 700 ms of the 1 s a process
// may be off. A wall clock stepped by more than that since the measurement, forward or back, is
// untrusted at once and asks for a new measurement, whatever the monotonic age says; within it,
// the clock stays trusted. The estimate's age is the monotonic one.
func TestCheckSeesAWallClockStep(t *testing.T) {
	e := Estimate{Host: "h", Offset: 299 * time.Millisecond, Uncertainty: time.Millisecond, Hosts: 1, At: t0}
	const bound, stale = 2 * time.Second, 90 * time.Second
	for _, c := range []struct {
		name          string
		wall, mono    time.Duration
		trusted, redo bool
		reason        string
	}{
		{"no step", 10 * time.Second, 10 * time.Second, true, false, ""},
		{"forward within what the bound leaves", 10*time.Second + 700*time.Millisecond, 10 * time.Second, true, false, ""},
		{"forward past it", 10*time.Second + 701*time.Millisecond, 10 * time.Second, false, true, "stepped 701ms"},
		{"NTP step of 30 s right after the measurement", 30 * time.Second, 0, false, true, "stepped 30s"},
		{"back past it", 10*time.Second - 701*time.Millisecond, 10 * time.Second, false, true, "stepped -701ms"},
		{"back before the measurement", -5 * time.Second, 10 * time.Second, false, true, "went back 5s"},
		{"stale by the monotonic clock, whatever the wall says", 10 * time.Second, stale + time.Millisecond, false, false, "1m30s"},
	} {
		s := judgeElapsed(e, true, c.wall, c.mono, bound, stale)
		if s.Trusted != c.trusted || s.Stepped != c.redo || !strings.Contains(s.Reason, c.reason) {
			t.Errorf("%s: trusted %v, stepped %v, reason %q; want %v, %v and a reason with %q", c.name, s.Trusted, s.Stepped, s.Reason, c.trusted, c.redo, c.reason)
		}
		if s.Age != c.mono || s.Step != c.wall-c.mono {
			t.Errorf("%s: age %v step %v, want the monotonic age and wall − monotonic", c.name, s.Age, s.Step)
		}
	}
	// Check splits real readings: ones that carry the monotonic clock (time.Now's) and were not
	// stepped agree, and the age is the time between them.
	at := time.Now()
	e.At = at
	if s := Check(e, true, at.Add(10*time.Second), bound, stale); !s.Trusted || s.Step != 0 || s.Age != 10*time.Second {
		t.Fatalf("unstepped real readings: %+v", s)
	}
}
