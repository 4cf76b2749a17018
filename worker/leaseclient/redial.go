package leaseclient

import (
	"errors"
	"net"
	"slices"
	"time"

	"github.com/retryring/retryring/lease"
)

// maxRedirects bounds how many not_leader hints in a row are followed without a lease element in
// between; then the client paces its next attempt like any failure, so that two nodes naming each
// other cannot make it spin.
const maxRedirects = 4

// maxLearnedAddrs bounds the addresses taken from a no_leader answer: what a coordinator sends must
// not grow the client's address list without bound.
const maxLearnedAddrs = 16

// attemptResult is what one connection attempt came to, as far as the choice of the next one goes.
type attemptResult struct {
	addr string // where it went
	err  error  // why it ended
	got  bool   // whether a lease element arrived on it
	// holding: the worker holds a usable lease now (its end, D + ttl, is still ahead on the worker
	// clock). Run reads it after the attempt, so a lease that ran out meanwhile counts as gone.
	holding bool
}

// redial is where and when the next attempt goes.
type redial struct {
	addr     string
	delay    time.Duration
	redirect bool   // following a not_leader hint
	leaderID string // the hint's leader, when redirect
}

// dialPlan is the client's reconnect rule, docs/protocol.md section 9: which address next and how
// long to wait first. It does no I/O and reads no clock (Run tells it whether a usable lease is
// held) and draws from an injected random source, so that tests check the exact sequence.
//
// The pacing is what keeps a lease through a leader failover: while a usable lease is held, every
// moment spent waiting is a moment of lease gone, so the first retry goes at once and the next ones
// after about 100 ms, doubling up to about a second, cycling through the addresses; only a worker
// that holds nothing to lose backs off to seconds and spares the coordinators.
type dialPlan struct {
	backoff    Backoff
	configured []string
	learned    []string // from the last no_leader that named coordinators, minus the configured ones
	pos        int      // index in addrs() of the list address tried last
	rnd        func() float64

	redirects int // not_leader hints followed since the last element or the last paced attempt
	retries   int // paced attempts since the last element while a usable lease was held
	doubling  int // paced attempts since the last element, or since the lease ran out, without one
}

// newDialPlan starts at configured[start % len]. configured must not be empty (Validate).
func newDialPlan(b Backoff, configured []string, start int, rnd func() float64) *dialPlan {
	return &dialPlan{backoff: b, configured: configured, pos: start % len(configured), rnd: rnd}
}

// addrs is the address list: the configured addresses, then the learned ones.
func (p *dialPlan) addrs() []string {
	if len(p.learned) == 0 {
		return p.configured
	}
	return append(slices.Clip(p.configured), p.learned...)
}

// first is the address of the first attempt.
func (p *dialPlan) first() string { return p.addrs()[p.pos] }

// next takes the outcome of the attempt that just ended and says where and when the next one goes.
func (p *dialPlan) next(a attemptResult) redial {
	if a.got {
		p.redirects, p.retries, p.doubling = 0, 0, 0
	}
	if i := slices.Index(p.addrs(), a.addr); i >= 0 {
		p.pos = i
	}
	if id, addr, ok := redirectTarget(a.err); ok && p.redirects < maxRedirects {
		p.redirects++
		return redial{addr: addr, redirect: true, leaderID: id}
	}
	p.redirects = 0
	if addrs := hintedCoordinators(a.err); len(addrs) > 0 {
		p.learn(addrs)
		if i := slices.Index(p.addrs(), a.addr); i >= 0 {
			p.pos = i
		}
	}
	// Never the address that just failed again: after a leader's death the next node either leads
	// or names the new leader, and a dead host may cost a whole dial timeout per attempt.
	all := p.addrs()
	p.pos = (p.pos + 1) % len(all)
	r := redial{addr: all[p.pos]}
	switch {
	case configurationError(a.err):
		r.delay = p.backoff.configDelay(p.rnd())
	case a.holding:
		if p.retries > 0 { // the first retry goes at once: the failover is already under way
			r.delay = p.backoff.holdingDelay(p.retries, p.rnd())
		}
		p.retries++
		p.doubling = 0 // a lease that runs out later starts the doubling afresh
	default:
		r.delay = p.backoff.delay(p.doubling, p.rnd())
		p.doubling++
	}
	if hint := retryAfter(a.err, p.backoff.Max); hint > 0 {
		// busy: the normal pacing, but not before the coordinator's hint (jittered to
		// [hint/2, 3·hint/2), so that the clients it refused together come back spread out).
		r.delay = max(r.delay, hint/2+time.Duration(p.rnd()*float64(hint)))
	}
	return r
}

// retryAfter is the retry_after_ms of a busy answer, at most ceiling (a coordinator must not be
// able to park a client); 0 for any other error.
func retryAfter(err error, ceiling time.Duration) time.Duration {
	var we *lease.WireError
	if !errors.Is(err, lease.ErrBusy) || !errors.As(err, &we) || we.RetryAfterMs <= 0 {
		return 0
	}
	return min(time.Duration(min(we.RetryAfterMs, int64(ceiling/time.Millisecond)))*time.Millisecond, ceiling)
}

// learn replaces the learned addresses with those of addrs that are host:port and not configured,
// without duplicates, at most maxLearnedAddrs. A hint with no such address changes nothing.
func (p *dialPlan) learn(addrs []string) {
	var learned []string
	for _, a := range addrs {
		if len(learned) == maxLearnedAddrs {
			break
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" || slices.Contains(p.configured, a) || slices.Contains(learned, a) {
			continue
		}
		learned = append(learned, a)
	}
	if len(learned) > 0 {
		p.learned = learned
	}
}

// configurationError reports the errors a retry will not fix soon: they wait the maximum delay.
func configurationError(err error) bool {
	return errors.Is(err, lease.ErrBadSetup) || errors.Is(err, lease.ErrDuplicate) || errors.Is(err, lease.ErrUnauthorized)
}
