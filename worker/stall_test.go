package worker

import (
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// stallingGuard is a guard whose answer to an execution's check arrives late, as it does for a
// worker paused (GC, SIGSTOP) right after a check that allowed the call.
type stallingGuard struct {
	*lease.Guard
	execNeed time.Duration
	stall    time.Duration
}

func (g stallingGuard) CheckToken(token int64, need time.Duration) (lease.Lease, error) {
	l, err := g.Guard.CheckToken(token, need)
	if need == g.execNeed {
		time.Sleep(g.stall)
	}
	return l, err
}

// TestStallAfterTheCheckIsNotExecuted: an execution whose worker stalled after the guard's check
// for longer than the execution's timeout is not started (the lease that allowed it may have
// ended meanwhile); the row stays for a later pass, and nothing is lost.
func TestStallAfterTheCheckIsNotExecuted(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 700)
	e.record("pod-a", w, 10, "tx-1")
	cfg := e.config("w0")
	cfg.ExecTimeout = 40 * time.Millisecond
	ex := &recordingExecutor{}
	g := stallingGuard{Guard: e.guard(fullRing(), 0, 1, 24*time.Hour), execNeed: cfg.ExecTimeout, stall: 60 * time.Millisecond}
	sc := e.scanner(cfg, g, ex)

	res, err := sc.Cycle(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ex.all()); n != 0 {
		t.Fatalf("executed %d times after stalling past the deadline", n)
	}
	s := sc.Stats()
	if s.GuardRefusals == 0 || s.BucketsKept != 1 || s.Executed != 0 {
		t.Errorf("stats %+v (cycle %+v); want the execution refused and its bucket kept", s, res)
	}

	// Not stalled, the row runs.
	g.stall = 0
	sc2 := e.scanner(cfg, g, ex)
	e.clock.Advance(time.Minute) // past the IN_PROGRESS marker of the refused attempt
	drain(t, sc2, 4)
	if runs := ex.runs(); runs["tx-1"] != 1 {
		t.Errorf("executions %v; want tx-1 once", runs)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestGuardDemandsEachOperationsOwnTimeout (invariant 5): a lease with enough time left for
// queries but not for an execution lets the worker read its directory and rows, and executes
// nothing: the guard is asked for the execution timeout before a call, not the query timeout.
func TestGuardDemandsEachOperationsOwnTimeout(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 700)
	e.record("pod-a", w, 10, "tx-1", "tx-2")
	cfg := e.config("w0")
	cfg.QueryTimeout, cfg.ExecTimeout = time.Second, 5*time.Second
	ex := &recordingExecutor{}
	// 3 s left on a clock that does not move: enough for a query (1 s + margin), not for an
	// execution (5 s + margin).
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, 3*time.Second), ex)

	res, err := sc.Cycle(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ex.all()); n != 0 {
		t.Fatalf("executed %d rows on a lease too short for an execution", n)
	}
	s := sc.Stats()
	if s.GuardRefusals < 2 || s.BucketsKept != 1 || s.BucketsDeleted != 0 {
		t.Errorf("stats %+v (cycle %+v); want both executions refused and the bucket kept", s, res)
	}
	if e.count("es_retry_transactions_by_instance") != 2 {
		t.Error("rows are gone although none was executed")
	}
}
