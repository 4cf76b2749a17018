package leaseclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/lease"
)

const ms = time.Millisecond

// defaultBackoff is the protocol's pacing: doubling from 100 ms to 5 s, 100 ms while holding.
var defaultBackoff = Backoff{Min: DefaultBackoffMin, Max: DefaultBackoffMax, Holding: DefaultBackoffHolding}

// cycle returns a random source that repeats rs.
func cycle(rs ...float64) func() float64 {
	i := 0
	return func() float64 {
		r := rs[i%len(rs)]
		i++
		return r
	}
}

var errRefused = fmt.Errorf("%w: connecting: connection refused", ErrDisconnected)

// wire is an error frame's data as remoteError hands it to the plan.
func wire(code rsocket.ErrorCode, body string) error { return remoteError(frameError{code, body}) }

func notLeaderAt(addr string) error {
	return wire(rsocket.ErrorCodeApplicationError, `{"error":"not_leader","leader_id":"cx","leader_rsocket_addr":"`+addr+`"}`)
}

// step is one choice of the plan, as the tests compare it.
type step struct {
	addr     string
	delay    time.Duration
	redirect bool
}

func (p *dialPlan) step(a attemptResult) step {
	r := p.next(a)
	return step{r.addr, r.delay, r.redirect}
}

func checkSteps(t *testing.T, what string, got, want []step) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// TestDialPlanWhileHoldingRetriesAtOnceThenAbout100ms: with a usable lease, the retry after the
// connection that delivered elements goes at once, to the next address; the next one waits a draw
// from [50, 150) ms, and the ones after it a draw around a mean that doubles up to 1 s, going round
// the list, never back to the address that just failed.
func TestDialPlanWhileHoldingRetriesAtOnceThenAbout100ms(t *testing.T) {
	p := newDialPlan(defaultBackoff, []string{"a:1", "b:1", "c:1"}, 1, cycle(0.25, 0.5, 0.75))
	if got := p.first(); got != "b:1" {
		t.Fatalf("first address %s, want b:1 (the start drawn)", got)
	}
	got := []step{p.step(attemptResult{addr: "b:1", err: ErrDisconnected, got: true, holding: true})}
	for _, addr := range []string{"c:1", "a:1", "b:1", "c:1"} {
		got = append(got, p.step(attemptResult{addr: addr, err: errRefused, holding: true}))
	}
	checkSteps(t, "retries while holding", got, []step{
		{"c:1", 0, false}, {"a:1", 75 * ms, false}, {"b:1", 200 * ms, false}, {"c:1", 500 * ms, false}, {"a:1", 600 * ms, false},
	})

	// An element resets the pacing: the next retry goes at once again.
	got = []step{p.step(attemptResult{addr: "a:1", err: ErrDisconnected, got: true, holding: true})}
	got = append(got, p.step(attemptResult{addr: "b:1", err: errRefused, holding: true}))
	checkSteps(t, "after another element", got, []step{{"b:1", 0, false}, {"c:1", 100 * ms, false}})
}

// TestDialPlanDoublesOnceTheLeaseIsGone: without a usable lease the delay is the full-jitter
// doubling, from its first ceiling when the lease has just run out (attempts made while holding do
// not count), and capped at Max.
func TestDialPlanDoublesOnceTheLeaseIsGone(t *testing.T) {
	p := newDialPlan(defaultBackoff, []string{"a:1", "b:1"}, 0, cycle(0.5))
	got := []step{
		p.step(attemptResult{addr: "a:1", err: ErrDisconnected, got: true, holding: true}),
		p.step(attemptResult{addr: "b:1", err: errRefused, holding: true}),
		p.step(attemptResult{addr: "a:1", err: errRefused, holding: true}),
	}
	for i := 0; i < 8; i++ { // the lease ran out during the third attempt
		got = append(got, p.step(attemptResult{addr: got[len(got)-1].addr, err: errRefused}))
	}
	checkSteps(t, "lease running out", got, []step{
		{"b:1", 0, false}, {"a:1", 100 * ms, false}, {"b:1", 200 * ms, false},
		{"a:1", 50 * ms, false}, {"b:1", 100 * ms, false}, {"a:1", 200 * ms, false}, {"b:1", 400 * ms, false},
		{"a:1", 800 * ms, false}, {"b:1", 1600 * ms, false}, {"a:1", 2500 * ms, false}, {"b:1", 2500 * ms, false},
	})

	// A worker that never held a lease doubles from the start; an element resets the doubling,
	// even when its lease is already gone when the connection fails.
	p = newDialPlan(defaultBackoff, []string{"a:1"}, 0, cycle(0.5))
	got = []step{
		p.step(attemptResult{addr: "a:1", err: errRefused}),
		p.step(attemptResult{addr: "a:1", err: errRefused}),
		p.step(attemptResult{addr: "a:1", err: ErrDisconnected, got: true}),
	}
	checkSteps(t, "never held, then an element whose lease is gone", got, []step{
		{"a:1", 50 * ms, false}, {"a:1", 100 * ms, false}, {"a:1", 50 * ms, false},
	})
}

// TestDialPlanRedirects: not_leader with an address is followed at once; a refused redirect goes
// on to the address after it in the list (or after the node that redirected, when the target is
// not in the list), not to the dead one again; five not_leader in a row without an element are
// one too many and the fifth is paced like a failure.
func TestDialPlanRedirects(t *testing.T) {
	p := newDialPlan(defaultBackoff, []string{"f:1", "dead:1", "l:1"}, 0, cycle(0.5))
	got := []step{
		p.step(attemptResult{addr: "f:1", err: notLeaderAt("dead:1"), holding: true}),
		p.step(attemptResult{addr: "dead:1", err: errRefused, holding: true}),
	}
	checkSteps(t, "redirect to a listed dead node", got, []step{{"dead:1", 0, true}, {"l:1", 0, false}})

	p = newDialPlan(defaultBackoff, []string{"f:1", "g:1", "l:1"}, 0, cycle(0.5))
	got = []step{
		p.step(attemptResult{addr: "f:1", err: notLeaderAt("10.9.9.9:1"), holding: true}),
		p.step(attemptResult{addr: "10.9.9.9:1", err: errRefused, holding: true}),
	}
	checkSteps(t, "redirect to an unlisted dead node", got, []step{{"10.9.9.9:1", 0, true}, {"g:1", 0, false}})

	// Two nodes with stale views naming each other.
	p = newDialPlan(defaultBackoff, []string{"f:1", "g:1"}, 0, cycle(0.5))
	var loop []step
	at := "f:1"
	for i := 0; i < 6; i++ {
		other := map[string]string{"f:1": "g:1", "g:1": "f:1"}[at]
		s := p.step(attemptResult{addr: at, err: notLeaderAt(other)})
		loop = append(loop, s)
		at = s.addr
	}
	checkSteps(t, "redirect loop", loop, []step{
		{"g:1", 0, true}, {"f:1", 0, true}, {"g:1", 0, true}, {"f:1", 0, true}, {"g:1", 50 * ms, false}, {"f:1", 0, true},
	})

	// An element in between resets the count.
	p = newDialPlan(defaultBackoff, []string{"f:1", "g:1"}, 0, cycle(0.5))
	for i := 0; i < 3; i++ {
		p.next(attemptResult{addr: "f:1", err: notLeaderAt("g:1")})
	}
	p.next(attemptResult{addr: "g:1", err: ErrDisconnected, got: true, holding: true})
	for i := 0; i < 4; i++ {
		if s := p.step(attemptResult{addr: "f:1", err: notLeaderAt("g:1"), holding: true}); !s.redirect {
			t.Fatalf("redirect %d after an element not followed: %v", i+1, s)
		}
	}
}

// TestDialPlanLearnsTheCoordinatorsOfNoLeader: the coordinators a no_leader answer names join
// the cycle after the configured addresses (here one Service address, which alone would be dialed
// again and again); what is not host:port, already configured or past the first 16 is left out;
// a no_leader without the array keeps what was learned, a new array replaces it.
func TestDialPlanLearnsTheCoordinatorsOfNoLeader(t *testing.T) {
	noLeader := func(entries ...string) error {
		body := `{"error":"no_leader"`
		if entries != nil {
			body += `,"coordinators":[` + strings.Join(entries, ",") + `]`
		}
		return wire(rsocket.ErrorCodeApplicationError, body+"}")
	}
	entry := func(id, addr string) string { return `{"id":"` + id + `","rsocket_addr":"` + addr + `"}` }

	p := newDialPlan(defaultBackoff, []string{"svc:7000"}, 0, cycle(0.5))
	hint := noLeader(entry("c1", "10.0.0.1:7000"), entry("c2", "10.0.0.2:7000"), entry("c3", "svc:7000"),
		entry("c4", "no-port"), entry("c5", ""), entry("c6", "10.0.0.1:7000"), `{"id":"c7"}`)
	got := []step{p.step(attemptResult{addr: "svc:7000", err: hint, holding: true})}
	for i := 0; i < 3; i++ {
		got = append(got, p.step(attemptResult{addr: got[len(got)-1].addr, err: errRefused, holding: true}))
	}
	got = append(got, p.step(attemptResult{addr: "10.0.0.1:7000", err: noLeader(), holding: true}))
	checkSteps(t, "learned addresses", got, []step{
		{"10.0.0.1:7000", 0, false}, {"10.0.0.2:7000", 100 * ms, false}, {"svc:7000", 200 * ms, false},
		{"10.0.0.1:7000", 400 * ms, false}, {"10.0.0.2:7000", 800 * ms, false},
	})

	p.next(attemptResult{addr: "10.0.0.2:7000", err: noLeader(entry("c9", "10.0.0.9:7000"))})
	if got, want := fmt.Sprint(p.addrs()), "[svc:7000 10.0.0.9:7000]"; got != want {
		t.Errorf("after a new hint the list is %s, want %s", got, want)
	}

	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, entry(fmt.Sprint("n", i), fmt.Sprintf("10.1.0.%d:7000", i)))
	}
	p.next(attemptResult{addr: "svc:7000", err: noLeader(many...)})
	if n := len(p.addrs()); n != 1+maxLearnedAddrs {
		t.Errorf("%d addresses after a hint of 40, want %d", n, 1+maxLearnedAddrs)
	}

	// Bodies of another shape, and coordinators on anything but no_leader, name nothing.
	for _, err := range []error{
		wire(rsocket.ErrorCodeApplicationError, `{"error":"no_leader","coordinators":"c1"}`),
		wire(rsocket.ErrorCodeApplicationError, `{"error":"no_leader","coordinators":[1,2]}`),
		wire(rsocket.ErrorCodeApplicationError, `{"error":"unavailable","coordinators":[`+entry("c1", "10.0.0.1:7000")+`]}`),
	} {
		if !errors.Is(err, lease.ErrNoLeader) && !errors.Is(err, lease.ErrUnavailable) {
			t.Errorf("%v: lost its code", err)
		}
		if addrs := hintedCoordinators(err); addrs != nil {
			t.Errorf("%v: names %v", err, addrs)
		}
	}
	if err := noLeader(entry("c1", "10.0.0.1:7000")); !errors.Is(err, lease.ErrNoLeader) {
		t.Errorf("a hint hides no_leader: %v", err)
	}
}

// TestDialPlanConfigurationErrorsWaitTheMaximum: bad_setup, duplicate_connection and
// unauthorized wait a draw from [Max/2, Max), lease or not; the doubling is not advanced by them.
func TestDialPlanConfigurationErrorsWaitTheMaximum(t *testing.T) {
	for _, body := range []string{`{"error":"bad_setup"}`, `{"error":"duplicate_connection"}`, `{"error":"unauthorized"}`} {
		code := rsocket.ErrorCodeRejectedSetup
		if strings.Contains(body, "duplicate") {
			code = rsocket.ErrorCodeApplicationError
		}
		p := newDialPlan(defaultBackoff, []string{"a:1", "b:1"}, 0, cycle(0, 0.5))
		got := []step{
			p.step(attemptResult{addr: "a:1", err: wire(code, body), got: true, holding: true}),
			p.step(attemptResult{addr: "b:1", err: wire(code, body)}),
			p.step(attemptResult{addr: "a:1", err: errRefused}),
		}
		checkSteps(t, body, got, []step{{"b:1", 2500 * ms, false}, {"a:1", 3750 * ms, false}, {"b:1", 0, false}})
	}
}

func TestPacingBounds(t *testing.T) {
	b := defaultBackoff
	if lo, hi := b.holdingDelay(1, 0), b.holdingDelay(1, 0.999999); lo != 50*ms || hi >= 150*ms || hi < 149*ms {
		t.Errorf("first holding delays span [%v, %v], want [50ms, 150ms)", lo, hi)
	}
	if lo, hi := b.holdingDelay(3, 0), b.holdingDelay(3, 0.999999); lo != 200*ms || hi >= 600*ms || hi < 599*ms {
		t.Errorf("third holding delays span [%v, %v], want [200ms, 600ms)", lo, hi)
	}
	for _, retry := range []int{5, 6, 40, 1000} { // capped at a mean of 1 s, however long it lasts
		if lo, hi := b.holdingDelay(retry, 0), b.holdingDelay(retry, 0.999999); lo != 500*ms || hi >= 1500*ms || hi < 1499*ms {
			t.Errorf("holding delays of retry %d span [%v, %v], want [500ms, 1.5s)", retry, lo, hi)
		}
	}
	if lo, hi := b.configDelay(0), b.configDelay(0.999999); lo != 2500*ms || hi >= 5*time.Second || hi < 4990*ms {
		t.Errorf("configuration delays span [%v, %v], want [2.5s, 5s)", lo, hi)
	}
}
