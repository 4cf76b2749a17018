package worker

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/lease"
)

// The circuit breaker (product.md, "Operating retries"): a downstream that is down answers every
// retry with a transient failure, and each one uses an attempt and a re-recording for nothing. So
// when at least half of the last breakerWindow executions of a step type (breakerMinCalls at
// least) were transient, its breaker opens and its rows wait where they are, their attempts
// unused, until a cool-off has passed; then a few probes go through, and the breaker closes when
// every one of them succeeds, or opens again for twice as long when one fails.
const (
	breakerWindow     = 50
	breakerMinCalls   = 20
	breakerCoolOff    = 10 * time.Second
	breakerMaxCoolOff = 5 * time.Minute
	breakerProbes     = 3
	// maxBreakers bounds the breakers (and the label values of their gauge): impl types come from
	// the directory, which any writer fills. The impl types past it share overflowBreaker.
	maxBreakers     = lease.MaxReportBreakers
	overflowBreaker = "(other)"
)

// breakerState is where a breaker stands; its values are the state gauge's.
type breakerState int

const (
	breakerClosed breakerState = iota
	breakerHalfOpen
	breakerOpen
)

func (s breakerState) String() string {
	switch s {
	case breakerHalfOpen:
		return "half_open"
	case breakerOpen:
		return "open"
	default:
		return "closed"
	}
}

// breaker is one step type's circuit breaker. It is pure: the caller passes the time in. Not safe
// for concurrent use (breakers holds the lock).
type breaker struct {
	state breakerState
	// The outcomes of the executions admitted while closed, the newest breakerWindow of them, as
	// a ring: transient[i] for i < n, next the slot of the next one.
	transient [breakerWindow]bool
	n, next   int
	failures  int // transient outcomes among the n

	coolOff   time.Duration // the cool-off of the current (or last) opening
	openUntil time.Time
	probes    int // probes admitted in this half-open period, not abandoned
	passed    int // probes of this half-open period that succeeded
	// gen changes whenever the state does: an outcome of an execution admitted under another gen
	// (a call that started while closed and ended after the breaker opened) counts for nothing.
	gen uint64
}

// admission is what breaker.admit handed out: settle or abandon it once.
type admission struct {
	gen   uint64
	probe bool
}

// admit reports whether an execution may start at now, and its admission.
func (b *breaker) admit(now time.Time) (admission, bool) {
	if b.state == breakerOpen {
		if now.Before(b.openUntil) {
			return admission{}, false
		}
		b.state, b.probes, b.passed = breakerHalfOpen, 0, 0
		b.gen++
	}
	if b.state == breakerHalfOpen {
		if b.probes >= breakerProbes {
			return admission{}, false
		}
		b.probes++
		return admission{gen: b.gen, probe: true}, true
	}
	return admission{gen: b.gen}, true
}

// settle records the outcome of an admitted execution: transient or not (done and permanent are
// answers of a downstream that is up).
func (b *breaker) settle(a admission, transient bool, now time.Time) {
	if a.gen != b.gen {
		return
	}
	switch {
	case b.state == breakerClosed:
		if b.n == breakerWindow && b.transient[b.next] {
			b.failures--
		}
		b.transient[b.next] = transient
		b.next = (b.next + 1) % breakerWindow
		b.n = min(b.n+1, breakerWindow)
		if transient {
			b.failures++
		}
		if b.n >= breakerMinCalls && 2*b.failures >= b.n {
			b.open(now, breakerCoolOff)
		}
	case a.probe && transient:
		b.open(now, min(2*b.coolOff, breakerMaxCoolOff))
	case a.probe:
		b.passed++
		if b.passed == breakerProbes {
			b.state = breakerClosed
			b.gen++
		}
	}
}

// abandon gives an admission back unused: the execution never reached the downstream (not sent,
// refused by the guard, paused meanwhile), so it says nothing about the downstream, and a probe
// slot it held goes to the next row.
func (b *breaker) abandon(a admission) {
	if a.gen == b.gen && a.probe && b.state == breakerHalfOpen {
		b.probes--
	}
}

func (b *breaker) open(now time.Time, coolOff time.Duration) {
	b.state, b.coolOff, b.openUntil = breakerOpen, coolOff, now.Add(coolOff)
	b.n, b.next, b.failures = 0, 0, 0
	b.gen++
}

// breakers are the worker's breakers, one per impl type, created for the policy's steps and for
// each type seen, up to maxBreakers. Safe for concurrent use.
type breakers struct {
	mu sync.Mutex
	m  map[string]*breaker
	// disabled admits every execution (Config.NoBreaker); the breakers still count, so the
	// report shows what they would have done.
	disabled bool
}

func newBreakers(impls []string, disabled bool) *breakers {
	bs := &breakers{m: map[string]*breaker{}, disabled: disabled}
	for _, impl := range impls {
		bs.of(impl)
	}
	return bs
}

// of returns impl's breaker; bs.mu held.
func (bs *breakers) of(impl string) *breaker {
	if b, ok := bs.m[impl]; ok {
		return b
	}
	if len(bs.m) >= maxBreakers-1 { // the last place is the overflow's
		impl = overflowBreaker
		if b, ok := bs.m[impl]; ok {
			return b
		}
	}
	b := &breaker{coolOff: breakerCoolOff}
	bs.m[impl] = b
	return b
}

// breakerTicket is an admission of impl's breaker.
type breakerTicket struct {
	b *breaker
	a admission
}

func (bs *breakers) admit(impl string, now time.Time) (breakerTicket, bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.of(impl)
	a, ok := b.admit(now)
	return breakerTicket{b: b, a: a}, ok || bs.disabled
}

func (bs *breakers) settle(t breakerTicket, transient bool, now time.Time) {
	bs.mu.Lock()
	t.b.settle(t.a, transient, now)
	bs.mu.Unlock()
}

func (bs *breakers) abandon(t breakerTicket) {
	bs.mu.Lock()
	t.b.abandon(t.a)
	bs.mu.Unlock()
}

// breakerView is one breaker as the report and the metrics show it.
type breakerView struct {
	impl      string
	state     breakerState
	openUntil time.Time
}

// view lists every breaker, by impl type. An open breaker whose cool-off has passed is shown half
// open: the next row of its type is a probe.
func (bs *breakers) view(now time.Time) []breakerView {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	out := make([]breakerView, 0, len(bs.m))
	for impl, b := range bs.m {
		v := breakerView{impl: impl, state: b.state}
		if b.state == breakerOpen {
			if now.Before(b.openUntil) {
				v.openUntil = b.openUntil
			} else {
				v.state = breakerHalfOpen
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b breakerView) int { return strings.Compare(a.impl, b.impl) })
	return out
}
