package worker

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// TestThrottleFollowsTheControls: on the manual clock, the token bucket lets through what its
// rate allows and says how long the next token is away; its rate follows the lease's controls
// as they change, capped by MaxRate; no limit lets everything through, a share of 0 nothing.
func TestThrottleFollowsTheControls(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	per := func(r float64) *lease.Controls { return &lease.Controls{RatePerS: &r} }
	th := newThrottle(0)
	for i := 0; i < 1000; i++ {
		if wait, never := th.take(clock.Now()); wait != 0 || never {
			t.Fatalf("no limit: call %d waits %v (never %v)", i, wait, never)
		}
	}

	th.apply(per(2), 0, clock.Now())
	if th.limit() != 2 {
		t.Fatalf("limit %v after a share of 2/s", th.limit())
	}
	if wait, _ := th.take(clock.Now()); wait == 0 {
		t.Fatal("a new rate starts with a token in the bucket")
	}
	passed := 0
	for step := 0; step < 100; step++ { // 10 s in steps of 100 ms, with calls waiting all along
		for {
			wait, never := th.take(clock.Now())
			if never {
				t.Fatal("a share of 2/s refuses for good")
			}
			if wait > 0 {
				if wait > 500*time.Millisecond {
					t.Fatalf("at 2/s the next token is %v away", wait)
				}
				break
			}
			passed++
		}
		clock.Advance(100 * time.Millisecond)
	}
	if passed < 18 || passed > 20 { // the rate over 10 s from an empty bucket, less up to a period of phase
		t.Errorf("%d calls in 10 s at 2/s", passed)
	}

	th.apply(per(2), 0, clock.Now()) // a renewal with the same share changes nothing
	th.apply(per(0), 0, clock.Now())
	clock.Advance(time.Minute)
	if _, never := th.take(clock.Now()); !never {
		t.Fatal("a share of 0 lets calls through")
	}
	th.apply(nil, 0, clock.Now())
	if wait, never := th.take(clock.Now()); wait != 0 || never || !math.IsInf(th.limit(), 1) {
		t.Fatalf("controls without a rate: wait %v, never %v, limit %v", wait, never, th.limit())
	}

	capped := newThrottle(1)
	if capped.limit() != 1 {
		t.Fatalf("MaxRate 1 without controls: limit %v", capped.limit())
	}
	capped.apply(per(50), 0, clock.Now())
	if capped.limit() != 1 {
		t.Fatalf("a share of 50/s under MaxRate 1: limit %v", capped.limit())
	}
	capped.apply(per(0.5), 0, clock.Now())
	if capped.limit() != 0.5 {
		t.Fatalf("a share of 0.5/s under MaxRate 1: limit %v", capped.limit())
	}
}

// TestThrottleStaysWithinTheMinute: whatever the rate, a worker that calls as fast as the bucket
// allows executes at most 110 % of its rate over any minute (the ring's bound), counted on the
// manual clock from the change of rate.
func TestThrottleStaysWithinTheMinute(t *testing.T) {
	for _, r := range []float64{0.5, 1, 7, 100, 2500} {
		clock := clocktest.New(clocktest.Start)
		th := newThrottle(0)
		th.apply(&lease.Controls{RatePerS: &r}, 0, clock.Now())
		end := clock.Now().Add(time.Minute)
		passed := 0
		for clock.Now().Before(end) {
			wait, _ := th.take(clock.Now())
			if wait == 0 {
				passed++
				continue
			}
			clock.Advance(wait)
		}
		if limit := 1.1 * 60 * r; float64(passed) > limit || float64(passed) < 60*r*0.9 {
			t.Errorf("rate %v/s: %d calls in a minute, want between 90 %% and 110 %% of %v", r, passed, 60*r)
		}
	}
}

// TestThrottleLosesNothingToALateWaiter: a row waiting for a token sleeps on a real timer, which
// on a busy machine fires late. The lateness must not be lost: over 10 minutes a waiter woken
// 10 ms late every time still executes at least 97 % of its rate (and never more than 110 %). With one
// token of room the bucket is full when the token is due, so each late wake-up loses what it was
// late by: at 16.7/s (a 50/s limit split over three workers), 14 % of the rate.
func TestThrottleLosesNothingToALateWaiter(t *testing.T) {
	const late = 10 * time.Millisecond
	for _, r := range []float64{0.5, 1, 3, 50.0 / 3, 50, 400} {
		clock := clocktest.New(clocktest.Start)
		th := newThrottle(0)
		th.apply(&lease.Controls{RatePerS: &r}, 0, clock.Now())
		th.take(clock.Now()) // the full bucket's first token: the test counts the steady state
		start := clock.Now()
		end := start.Add(10 * time.Minute)
		passed := 0
		for clock.Now().Before(end) {
			wait, _ := th.take(clock.Now())
			if wait == 0 {
				passed++
				continue
			}
			clock.Advance(wait + late)
		}
		if got := float64(passed) / (600 * r); got < 0.97 || got > 1.1 {
			t.Errorf("rate %.1f/s, waiter %v late: %d calls in 10 minutes, %.1f %% of the rate; want 97–110 %%", r, late, passed, 100*got)
		}
	}
}

// TestThrottleSmallSharesStayWithinTheRing: 1/s over 100 workers is a share of 0.01/s each. A
// bucket that starts full lets all 100 call at once when the limit is set; one that starts empty
// but fills from the change lets all 100 call at once a period later. Each worker takes up the
// limit at its own renewal (within 2 s of the others) and calls as fast as its bucket allows:
// over any minute of the first ten, the ring executes at most 110 % of its limit, and over the
// ten minutes at least 80 % of it.
func TestThrottleSmallSharesStayWithinTheRing(t *testing.T) {
	const workers = 100
	const ringRate = 1.0
	share := ringRate / workers
	t0 := clocktest.Start
	end := t0.Add(10 * time.Minute)
	var calls []time.Time
	for i := 0; i < workers; i++ {
		th := newThrottle(0)
		now := t0.Add(time.Duration(i*37%workers) * 20 * time.Millisecond)
		th.apply(&lease.Controls{RatePerS: &share}, phaseOf(lease.Lease{NodeIndex: i, NodeCount: workers}), now)
		for now.Before(end) {
			wait, never := th.take(now)
			if never {
				t.Fatalf("worker %d: a share of %v/s refuses for good", i, share)
			}
			if wait == 0 {
				calls = append(calls, now)
				continue
			}
			now = now.Add(wait)
		}
	}
	slices.SortFunc(calls, func(a, b time.Time) int { return a.Compare(b) })
	first := 0
	for _, c := range calls {
		if c.Before(t0.Add(time.Minute)) {
			first++
		}
	}
	if limit := 1.1 * 60 * ringRate; float64(first) > limit {
		t.Errorf("%d calls in the minute the limit was set, want at most %v", first, limit)
	}
	most, at := 0, time.Time{}
	for i, j := 0, 0; i < len(calls); i++ { // the minute starting at each call
		for j < len(calls) && calls[j].Before(calls[i].Add(time.Minute)) {
			j++
		}
		if j-i > most {
			most, at = j-i, calls[i]
		}
	}
	if limit := 1.1 * 60 * ringRate; float64(most) > limit {
		t.Errorf("%d calls in the minute from %v, want at most %v", most, at.Sub(t0), limit)
	}
	if want := 0.8 * 600 * ringRate; float64(len(calls)) < want {
		t.Errorf("%d calls in 10 minutes, want at least %v", len(calls), want)
	}
}
