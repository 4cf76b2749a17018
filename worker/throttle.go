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
// The bucket holds a tenth of a second of tokens (one at least): over any minute a worker then
// executes at most 60.1 × its rate, inside the 110 % the ring's limit allows, and a waiter woken a
// little late loses nothing it could have used.
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
	if limit == rate.Inf || limit/10 < 1 {
		return 1
	}
	return int(min(float64(limit/10), math.MaxInt32))
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
