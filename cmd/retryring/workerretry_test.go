package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
)

// TestRetryDelaySchedule: retry n waits within [c/2, c) for c = min(30 s, 0.5 s × 2^n): the
// schedule the flag help and docs/operations.md state, the draw's extremes included, and no
// overflow however many retries.
func TestRetryDelaySchedule(t *testing.T) {
	ceilings := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, c := range ceilings {
		if lo, hi := retryDelay(n, 0), retryDelay(n, 0.999999); lo != c/2 || hi >= c || hi < c-c/1000 {
			t.Errorf("retry %d: [%v, %v], want [%v, %v)", n, lo, hi, c/2, c)
		}
	}
	for _, n := range []int{15, 16, 63, 64, 1000} {
		if d := retryDelay(n, 0.5); d != 22500*time.Millisecond {
			t.Errorf("retry %d: %v, want 22.5s (the cap)", n, d)
		}
	}
}

// TestFailureLogSpacing: a dependency that keeps failing the same way is logged at its first
// failure and then once a minute, not at every attempt; a change of cause is logged at once; the
// recovery reports the failures and how long they lasted, and starts afresh.
func TestFailureLogSpacing(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var f failureLog
	var lines []failureLine
	at := t0
	for range 200 { // 200 attempts 0.5 s apart: 100 s
		lines = append(lines, f.failed(at, "refused"))
		at = at.Add(500 * time.Millisecond)
	}
	var logged []string
	for i, l := range lines {
		if l != lineNone {
			logged = append(logged, fmt.Sprintf("%d:%d", i, l))
		}
	}
	if got := strings.Join(logged, " "); got != fmt.Sprintf("0:%d 120:%d", lineFirst, lineStillBad) {
		t.Fatalf("lines logged at attempts %s; want the first and the one a minute later", got)
	}
	if l := f.failed(at, "login refused"); l != lineChanged {
		t.Fatalf("a new cause: %d, want lineChanged", l)
	}
	if n, d := f.recovered(at.Add(time.Second)); n != 201 || d != 101*time.Second {
		t.Fatalf("recovered: %d failures over %v, want 201 over 1m41s", n, d)
	}
	if n, _ := f.recovered(at.Add(2 * time.Second)); n != 0 {
		t.Fatalf("a second success reports %d failures, want none", n)
	}
	if l := f.failed(at, "refused"); l != lineFirst {
		t.Fatalf("the first failure after a recovery: %d, want lineFirst", l)
	}
}

// TestCassandraWatchSteps: the first failed check makes the worker not ready, the run of failures
// gives the ranges back once it has lasted lostAfter (once), and the first success after it is
// the way back; a success alone is nothing.
func TestCassandraWatchSteps(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := cassandraWatch{lostAfter: 30 * time.Second}
	for _, c := range []struct {
		at   time.Duration
		ok   bool
		want watchStep
	}{
		{0, true, stepNone},
		{1 * time.Second, false, stepLost},
		{2 * time.Second, false, stepNone},
		{30 * time.Second, false, stepNone}, // 29 s into the run
		{31 * time.Second, false, stepGiveUp},
		{40 * time.Second, false, stepNone},
		{41 * time.Second, true, stepBack},
		{42 * time.Second, true, stepNone},
		{43 * time.Second, false, stepLost}, // a new run counts from its own first failure
		{44 * time.Second, true, stepBack},  // back before giving up: ready again, nothing to rejoin
		{45 * time.Second, false, stepLost},
		{75 * time.Second, false, stepGiveUp},
	} {
		if got := w.observe(t0.Add(c.at), c.ok); got != c.want {
			t.Fatalf("at %v ok=%v: step %d, want %d", c.at, c.ok, got, c.want)
		}
	}
}

// TestCassandraReasons: what /readyz says for each way Cassandra can be unusable, in one line.
func TestCassandraReasons(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&cassandra.ConnectError{Host: "127.0.0.1:1", Reason: "dial tcp 127.0.0.1:1: connect: connection refused", Err: errors.New("x")},
			"cassandra unreachable: connect to 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused"},
		{&cassandra.ConnectError{Host: "10.0.0.1:9042", Reason: `login as "w" refused: bad credentials`, Kind: cassandra.ErrLogin, Err: errors.New("x")},
			`cassandra refused the login at 10.0.0.1:9042: login as "w" refused: bad credentials`},
		{&cassandra.ConnectError{Host: "10.0.0.1:9042", Reason: "the node requires a client certificate (require_client_auth) and none was given", Kind: cassandra.ErrTLS, Err: errors.New("x")},
			"cassandra TLS failed at 10.0.0.1:9042: the node requires a client certificate (require_client_auth) and none was given"},
		{fmt.Errorf("%w: keyspace ks lacks column es_execution_markers.committed_by", cassandra.ErrSchemaOutdated),
			"cassandra: keyspace schema is older than this release (run `retryring schema apply`): keyspace ks lacks column es_execution_markers.committed_by"},
		{errors.New("gocql: no hosts available\\nin the pool"), `cassandra unreachable: gocql: no hosts available\nin the pool`},
		{errors.New("gocql: no hosts available\nin the pool"), "cassandra unreachable: gocql: no hosts available in the pool"},
	} {
		if got := cassandraReason(c.err); got != c.want {
			t.Errorf("cassandraReason(%v) =\n%s\nwant\n%s", c.err, got, c.want)
		}
	}
}

// TestWorkerCassandraLostAfterFlag: a --cassandra-lost-after that is not positive stops the
// worker at once, before it connects to anything, saying what the flag is for.
func TestWorkerCassandraLostAfterFlag(t *testing.T) {
	for _, v := range []string{"0s", "-5s"} {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"worker", "--http-addr", "", "--cassandra", "127.0.0.1:1", "--cassandra-lost-after", v})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--cassandra-lost-after "+strings.TrimSuffix(v, "s")) ||
			!strings.Contains(err.Error(), "must be positive: it is how long Cassandra may be unreachable before the worker gives its ranges back") {
			t.Errorf("--cassandra-lost-after %s: %v", v, err)
		}
	}
}

// TestRingMembershipGate: the worker may be in its ring only once a first clock verdict said
// trusted and while Cassandra is not lost; the reason to leave is the clock's first, then
// Cassandra's.
func TestRingMembershipGate(t *testing.T) {
	m := &ringMembership{wake: make(chan struct{}, 1)}
	gate := func() string {
		open, reason := m.gate()
		return fmt.Sprintf("%v %s", open, reason)
	}
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "false "},
		{func() { m.cassandraChanged("cassandra unreachable: x (for longer than --cassandra-lost-after 30s)") }, "false "},
		{func() { m.clockChanged(clockcheck.Status{Trusted: true}) }, "false cassandra unreachable: x (for longer than --cassandra-lost-after 30s)"},
		{func() { m.clockChanged(clockcheck.Status{Reason: "clock offset beyond"}) }, "false clock offset beyond"},
		{func() { m.cassandraChanged("") }, "false clock offset beyond"},
		{func() { m.clockChanged(clockcheck.Status{Trusted: true}) }, "true "},
	}
	for i, s := range steps {
		s.do()
		if got := gate(); got != s.want {
			t.Fatalf("step %d: gate %q, want %q", i, got, s.want)
		}
	}
	select {
	case <-m.wake: // the changes left one wake-up for run, never blocking their callers
	default:
		t.Fatal("no wake-up after the changes")
	}
}
