package worker

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/testkit/clocktest"
)

// TestBreakerOpensCoolsOffProbesAndCloses walks one outage: 19 transient failures are not enough
// to judge; the 20th opens the breaker; nothing passes during the cool-off; then three probes and
// no more; a failed probe reopens it for twice as long; three good probes close it, and the next
// opening starts from the first cool-off again.
func TestBreakerOpensCoolsOffProbesAndCloses(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	b := &breaker{coolOff: breakerCoolOff}
	run := func(transient bool) {
		t.Helper()
		a, ok := b.admit(clock.Now())
		if !ok {
			t.Fatalf("refused while %v", b.state)
		}
		b.settle(a, transient, clock.Now())
	}
	for i := 0; i < breakerMinCalls-1; i++ {
		run(true)
	}
	if b.state != breakerClosed {
		t.Fatalf("open after %d executions, fewer than %d", breakerMinCalls-1, breakerMinCalls)
	}
	run(true)
	if b.state != breakerOpen || !b.openUntil.Equal(clock.Now().Add(breakerCoolOff)) {
		t.Fatalf("after %d transient failures: %v until %v", breakerMinCalls, b.state, b.openUntil)
	}
	clock.Advance(breakerCoolOff - time.Millisecond)
	if _, ok := b.admit(clock.Now()); ok {
		t.Fatal("admitted during the cool-off")
	}

	clock.Advance(time.Millisecond)
	probes := probe(t, b, clock.Now())
	b.settle(probes[0], false, clock.Now())
	b.settle(probes[1], true, clock.Now()) // the downstream is still down
	b.settle(probes[2], false, clock.Now())
	if b.state != breakerOpen || b.coolOff != 2*breakerCoolOff {
		t.Fatalf("after a failed probe: %v for %v, want open for %v", b.state, b.coolOff, 2*breakerCoolOff)
	}

	clock.Advance(2 * breakerCoolOff)
	probes = probe(t, b, clock.Now())
	b.abandon(probes[2]) // never sent: its place goes to another row
	again, ok := b.admit(clock.Now())
	if !ok || !again.probe {
		t.Fatal("an abandoned probe's place was not given again")
	}
	for _, a := range []admission{probes[0], probes[1], again} {
		b.settle(a, false, clock.Now())
	}
	if b.state != breakerClosed {
		t.Fatalf("after three good probes: %v", b.state)
	}
	for i := 0; i < breakerMinCalls; i++ {
		run(true)
	}
	if b.state != breakerOpen || b.coolOff != breakerCoolOff {
		t.Fatalf("next outage: %v for %v, want open for the first cool-off %v", b.state, b.coolOff, breakerCoolOff)
	}
}

// probe admits the three probes of a half-open breaker and checks that a fourth waits.
func probe(t *testing.T, b *breaker, now time.Time) []admission {
	t.Helper()
	var out []admission
	for i := 0; i < breakerProbes; i++ {
		a, ok := b.admit(now)
		if !ok || !a.probe {
			t.Fatalf("probe %d refused (%v)", i, b.state)
		}
		out = append(out, a)
	}
	if _, ok := b.admit(now); ok {
		t.Fatalf("a %dth probe admitted", breakerProbes+1)
	}
	return out
}

// TestBreakerHistories drives a breaker with generated histories of admissions, outcomes in any
// order, abandons and clock moves, and checks it against the rule it implements, kept here in
// its plainest form (a list of outcomes since the breaker last changed state):
//   - it opens exactly when at least half of the last 50 outcomes admitted while closed (20 at
//     least) were transient, and outcomes of calls admitted before a change count for nothing;
//   - while open it admits nothing before the cool-off ends; the cool-off starts at 10 s, doubles
//     on every failed probe, never exceeds 5 min, and starts again at 10 s after a close;
//   - half open, it admits at most 3 probes at once, and closes when 3 have succeeded.
func TestBreakerHistories(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &breakerModel{b: &breaker{coolOff: breakerCoolOff}, now: clocktest.Start}
		pick := func(t *rapid.T) admission {
			i := rapid.IntRange(0, len(m.inFlight)-1).Draw(t, "which")
			a := m.inFlight[i]
			m.inFlight = append(m.inFlight[:i], m.inFlight[i+1:]...)
			return a
		}
		t.Repeat(map[string]func(*rapid.T){
			"admit": func(t *rapid.T) { m.admit(t) },
			"settle": func(t *rapid.T) {
				if len(m.inFlight) == 0 {
					t.Skip("nothing in flight")
				}
				m.settle(t, pick(t), rapid.Bool().Draw(t, "transient"))
			},
			// A run of calls that start and end one after the other, mostly failing or mostly
			// not: what it takes to reach the thresholds within a short history.
			"run": func(t *rapid.T) {
				n := rapid.IntRange(1, 2*breakerWindow).Draw(t, "calls")
				pTransient := rapid.SampledFrom([]float64{0, 0.3, 0.5, 0.7, 1}).Draw(t, "p_transient")
				for i := 0; i < n; i++ {
					if a, ok := m.admit(t); ok {
						m.inFlight = m.inFlight[:len(m.inFlight)-1]
						m.settle(t, a, rapid.Float64Range(0, 1).Draw(t, "u") < pTransient)
					}
				}
			},
			"abandon": func(t *rapid.T) {
				if len(m.inFlight) == 0 {
					t.Skip("nothing in flight")
				}
				m.abandon(t, pick(t))
			},
			"advance": func(t *rapid.T) {
				m.now = m.now.Add(rapid.SampledFrom([]time.Duration{
					time.Millisecond, time.Second, breakerCoolOff, breakerMaxCoolOff,
				}).Draw(t, "advance"))
			},
		})
	})
}

// breakerModel holds a breaker under test and what the rule says about it.
type breakerModel struct {
	b        *breaker
	now      time.Time
	inFlight []admission
	// closedLog lists the outcomes admitted while closed since the breaker last closed.
	closedLog []bool
	// lastCoolOff is the cool-off of the last opening; probesOut and passed count the probes of
	// the current half-open period.
	lastCoolOff       time.Duration
	probesOut, passed int
}

func (m *breakerModel) admit(t *rapid.T) (admission, bool) {
	b := m.b
	before, until := b.state, b.openUntil
	a, ok := b.admit(m.now)
	switch {
	case before == breakerOpen && m.now.Before(until):
		if ok {
			t.Fatalf("admitted at %v, open until %v", m.now, until)
		}
		return a, ok
	case before == breakerOpen:
		m.probesOut, m.passed = 0, 0 // the cool-off ended: a new half-open period
	}
	if b.state == breakerHalfOpen {
		if ok != (m.probesOut < breakerProbes) || (ok && !a.probe) {
			t.Fatalf("half open with %d probes out: admitted %v (probe %v)", m.probesOut, ok, a.probe)
		}
		if ok {
			m.probesOut++
		}
	} else if !ok || a.probe {
		t.Fatalf("closed breaker: admitted %v, probe %v", ok, a.probe)
	}
	if ok {
		m.inFlight = append(m.inFlight, a)
	}
	return a, ok
}

func (m *breakerModel) settle(t *rapid.T, a admission, transient bool) {
	b := m.b
	from, current := b.state, a.gen == b.gen
	b.settle(a, transient, m.now)
	switch {
	case !current:
		if b.state != from {
			t.Fatalf("an outcome from before a change moved the breaker from %v to %v", from, b.state)
		}
	case from == breakerClosed:
		m.closedLog = append(m.closedLog, transient)
		last := m.closedLog[max(0, len(m.closedLog)-breakerWindow):]
		failures := 0
		for _, f := range last {
			if f {
				failures++
			}
		}
		shouldOpen := len(last) >= breakerMinCalls && 2*failures >= len(last)
		if shouldOpen != (b.state == breakerOpen) {
			t.Fatalf("%d transient of the last %d: state %v", failures, len(last), b.state)
		}
		if shouldOpen && b.coolOff != breakerCoolOff {
			t.Fatalf("opened from closed for %v, want %v", b.coolOff, breakerCoolOff)
		}
	case transient:
		want := min(2*m.lastCoolOff, breakerMaxCoolOff)
		if b.state != breakerOpen || b.coolOff != want {
			t.Fatalf("failed probe: %v for %v, want open for %v", b.state, b.coolOff, want)
		}
	default:
		m.passed++
		if (m.passed == breakerProbes) != (b.state == breakerClosed) {
			t.Fatalf("%d good probes: %v", m.passed, b.state)
		}
	}
	if b.state == breakerOpen && from != breakerOpen {
		if !b.openUntil.Equal(m.now.Add(b.coolOff)) {
			t.Fatalf("opened at %v until %v (cool-off %v)", m.now, b.openUntil, b.coolOff)
		}
		m.lastCoolOff = b.coolOff
	}
	if b.state != from {
		m.closedLog, m.probesOut, m.passed = nil, 0, 0
	}
}

func (m *breakerModel) abandon(t *rapid.T, a admission) {
	b := m.b
	from := b.state
	b.abandon(a)
	if b.state != from {
		t.Fatalf("an abandon moved the breaker from %v to %v", from, b.state)
	}
	if a.probe && a.gen == b.gen && b.state == breakerHalfOpen {
		m.probesOut--
	}
}

// TestBreakersAreBounded: impl types past the cap share one breaker, so that neither memory nor
// the gauge's labels grow with whatever a writer puts in the directory.
func TestBreakersAreBounded(t *testing.T) {
	bs := newBreakers([]string{"Payment", "Ship"}, false)
	now := clocktest.Start
	for i := 0; i < 3*maxBreakers; i++ {
		if _, ok := bs.admit(fmt.Sprintf("impl-%d", i), now); !ok {
			t.Fatal("a closed breaker refused")
		}
	}
	views := bs.view(now)
	if len(views) != maxBreakers {
		t.Fatalf("%d breakers, want %d", len(views), maxBreakers)
	}
	names := map[string]bool{}
	for _, v := range views {
		names[v.impl] = true
	}
	if !names["Payment"] || !names["Ship"] || !names[overflowBreaker] {
		t.Errorf("breakers %v: the policy's steps and the overflow must be there", names)
	}
	a, _ := bs.admit("impl-1000", now)
	o, _ := bs.admit("impl-2000", now)
	if a.b != o.b || a.b != bs.m[overflowBreaker] {
		t.Error("two impl types past the cap do not share the overflow breaker")
	}
}

// TestBreakersDisabledAdmitEverything: with NoBreaker the breakers still count (the report shows
// them open) but every execution is admitted.
func TestBreakersDisabledAdmitEverything(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	bs := newBreakers(nil, true)
	for i := 0; i < 50; i++ {
		tk, ok := bs.admit("Payment", now)
		if !ok {
			t.Fatalf("execution %d refused by a disabled breaker", i)
		}
		bs.settle(tk, true, now)
	}
	if v := bs.view(now); len(v) != 1 || v[0].state != breakerOpen {
		t.Fatalf("breakers %+v; want Payment's counted open", v)
	}
	if _, ok := bs.admit("Payment", now); !ok {
		t.Fatal("an open but disabled breaker refused")
	}
}
