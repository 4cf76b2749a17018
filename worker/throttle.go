package worker

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/retryring/retryring/lease"
)

// throttle is the token bucket every execution takes a token from: its rate is this worker's share
// of the ring's limit (the lease's controls), capped by Config.MaxRate. It is pure: the caller
// passes the time in. Safe for concurrent use.
//
// The Scanner passes the real time (time.Now), not its Clock: a rate counts seconds of the
// world, and the rows waiting for a token sleep on real timers, which a test's manual clock
// would leave waiting for a refill that never comes.
//
// The bucket holds a tenth of a second of tokens, and two at least from 1/s up. A row waits for
// its token on a real timer, which fires late on a busy machine; with room for one token only,
// the bucket is full when the token is due and every late wake-up loses what it was late by (at
// 16.7/s, a 50/s limit split over three workers, waking 10 ms late costs 14 % of the rate). With
// room for a second token the next wait is shorter by the lateness, as long as it is under one
// token's time. Over any minute a worker then executes at most 60 × its rate + 2 (103 % at 1/s,
// less above), inside the 110 % the ring's limit allows; below 1/s a single token keeps a
// minute's count to the rate rounded up, and a wake-up late by milliseconds costs under 1 %.
type throttle struct {
	maxRate float64 // 0: none

	mu    sync.Mutex
	lim   *rate.Limiter
	share *float64 // the controls' rate_per_s in force; nil: no limit
}

func newThrottle(maxRate float64) *throttle {
	t := &throttle{maxRate: maxRate}
	limit := t.limitOf(nil)
	t.lim = rate.NewLimiter(limit, burstOf(limit))
	return t
}

// limitOf is the limit for a share of the ring's rate (nil: none) under maxRate.
func (t *throttle) limitOf(share *float64) rate.Limit {
	limit := rate.Inf
	if share != nil {
		limit = rate.Limit(*share)
	}
	if t.maxRate > 0 && rate.Limit(t.maxRate) < limit {
		limit = rate.Limit(t.maxRate)
	}
	return limit
}

func burstOf(limit rate.Limit) int {
	if limit == rate.Inf || limit < 1 {
		return 1
	}
	return int(max(2, min(float64(limit/10), math.MaxInt32)))
}

// apply sets the rate from the controls of the lease in force, when they changed it.
func (t *throttle) apply(c *lease.Controls, now time.Time) {
	var share *float64
	if c != nil {
		share = c.RatePerS
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if share == t.share || share != nil && t.share != nil && *share == *t.share {
		return
	}
	t.share = share
	limit := t.limitOf(share)
	t.lim.SetLimitAt(now, limit)
	t.lim.SetBurstAt(now, burstOf(limit))
}

// limit is the rate in force, executions per second (+Inf: none; rate.Inf is a finite float).
func (t *throttle) limit() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.lim.Limit(); l != rate.Inf {
		return float64(l)
	}
	return math.Inf(1)
}

// take takes a token at now if one is there. Otherwise it says how long until the next one, or
// never (a rate of 0: a member without a share).
func (t *throttle) take(now time.Time) (wait time.Duration, never bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.lim.Limit()
	if limit <= 0 { // not even a token left from an earlier rate
		return 0, true
	}
	if t.lim.AllowN(now, 1) {
		return 0, false
	}
	missing := 1 - t.lim.TokensAt(now)
	return max(time.Duration(missing/float64(limit)*float64(time.Second)), time.Millisecond), false
}

// tokenPoll bounds each sleep of a row waiting for a token, so that a new rate (a lease renewal
// with other controls) is taken up within that much, whatever the wait under the old one.
const tokenPoll = 200 * time.Millisecond

// errNoShare holds a row while this worker's share of the ring's rate is 0.
var errNoShare = heldError{"no share of the ring's rate"}

// waitToken waits for the throttle's token for one execution. One row waits at a time, the rest
// queue behind it (a queue of reservations would each keep the rate they were made under, long
// after the controls changed). No guard check is held across the wait: the execution asks the
// guard after it.
func (s *Scanner) waitToken(ctx context.Context) error {
	select {
	case s.tokenTurn <- struct{}{}:
	case <-ctx.Done():
		return ErrStopped
	}
	defer func() { <-s.tokenTurn }()
	for {
		s.controls() // the rate of the lease in force, renewed while this row waits
		wait, never := s.throttle.take(time.Now())
		switch {
		case never:
			return errNoShare
		case wait == 0:
			return nil
		}
		t := time.NewTimer(min(wait, tokenPoll))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ErrStopped
		}
	}
}
