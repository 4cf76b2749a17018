package worker

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/wallclock"
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
// token's time. Below 1/s the bucket holds one token.
//
// A new rate starts with an empty bucket: a full one would let every worker of the ring call at
// once when a limit is set, 100 calls in the first minute for 1/s over 100 workers. Over any
// minute a worker then executes at most 60 × its rate plus what its bucket holds (full at the
// minute's start at most): + 2 from 1/s to 20/s (103 % at 1/s), + rate/10 above (100.2 %), + 1
// below 1/s, far above 110 % once a worker's share is a few calls a minute. So the tokens are not
// due from the change either, but on a grid of the Unix clock offset by the worker's place in
// the ring (NodeIndex / NodeCount of one period): members with equal shares take turns, and the
// ring's calls are spaced by the ring's rate whenever each worker took up the limit (1/s over
// 100 workers is a call a second, not 100 calls every 100 s), up to the skew of the workers'
// clocks. With unequal shares (a --max-rate cap) the ring's bound is the sum of the workers'.
type throttle struct {
	maxRate float64 // 0: none

	mu    sync.Mutex
	lim   *rate.Limiter
	from  time.Time // no token before from + one token's time (the zero time: none awaited)
	share *float64  // the controls' rate_per_s in force; nil: no limit
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

// apply sets the rate from the controls of the lease in force, when they changed it. phase, in
// [0, 1), is the worker's place in the ring: its tokens are due phase of a period after the
// others' (phaseOf).
func (t *throttle) apply(c *lease.Controls, phase float64, now time.Time) {
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
	burst := burstOf(limit)
	t.lim = rate.NewLimiter(limit, burst)
	t.from = time.Time{}
	if limit == rate.Inf || limit <= 0 {
		return
	}
	t.from = gridAfter(now, float64(time.Second)/float64(limit), phase)
	t.lim.AllowN(t.from, burst) // empty at from: the first token is due one period later
}

// gridAfter is the first instant from now on at phase × period past a multiple of period
// (nanoseconds) on the Unix clock.
func gridAfter(now time.Time, period, phase float64) time.Time {
	offset := math.Mod(float64(now.UnixNano())-phase*period, period)
	if offset < 0 {
		offset += period
	}
	if offset == 0 {
		return now
	}
	return now.Add(time.Duration(period - offset))
}

// phaseOf is a member's place in the ring, in [0, 1).
func phaseOf(l lease.Lease) float64 {
	if l.NodeCount <= 0 || l.NodeIndex < 0 || l.NodeIndex >= l.NodeCount {
		return 0
	}
	return float64(l.NodeIndex) / float64(l.NodeCount)
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
	if now.Before(t.from) { // the bucket fills from t.from on
		return max(t.from.Sub(now)+time.Duration(float64(time.Second)/float64(limit)), time.Millisecond), false
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
		if !wallclock.Sleep(ctx, min(wait, tokenPoll)) {
			return ErrStopped
		}
	}
}
