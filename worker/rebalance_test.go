package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// TestRowExecutedDuringRebalanceIsStillCommitted: a rebalance takes the instance's token away
// while its step is being executed. The lease the execution ran under is still valid, and the
// coordinator cannot hand the token on before Drain (which waits for this row) let the worker
// release it; so the COMMITTED marker must still be written. Before settleOn, the guard refused
// it and the next owner executed the step a second time.
func TestRowExecutedDuringRebalanceIsStillCommitted(t *testing.T) {
	e := newEnv(t, 1, noon)
	const id = "tx-rebalanced"
	e.record("pod-a", e.win(window.DateOf(noon), 660), 1000, id)
	token := cassandra.Token("pod-a")

	g := e.guard(fullRing(), 0, 1, time.Minute)
	var once sync.Once
	ex := &recordingExecutor{answer: func(Task, int) Outcome {
		once.Do(func() { // epoch 2 drops the token of pod-a while the call runs
			g.Set(lease.Lease{WorkerID: "w1", Ring: e.ring, Epoch: 2, NodeIndex: 0, NodeCount: 2,
				Ranges: lease.Ranges{lease.FullRing}.Subtract(lease.Ranges{{Start: token, End: token}}),
				TTL:    time.Minute, ValidFrom: e.clock.Now()})
		})
		return Outcome{Kind: Done, Status: 200}
	}}
	sc := e.scanner(e.config("w1"), g, ex)
	if _, err := sc.Cycle(context.Background()); err != nil && !lease.IsGuardError(err) {
		t.Fatalf("cycle: %v", err)
	}
	m, ok := e.marker(id)
	if !ok || m.State != cassandra.MarkerCommitted {
		t.Fatalf("marker of the executed step = %+v (found %v), want COMMITTED", m, ok)
	}

	// The token's next owner (any worker holding it) skips the step.
	next := e.scanner(e.config("w2"), e.guard(fullRing(), 0, 1, time.Minute), ex)
	drain(t, next, 3)
	if n := ex.runs()[id]; n != 1 {
		t.Fatalf("step executed %d times, want once", n)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestSettleRefusedOnceTheRunningLeaseExpired: the fallback to the running lease ends with it.
func TestSettleRefusedOnceTheRunningLeaseExpired(t *testing.T) {
	clock := clocktest.New(noon)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	held := lease.Lease{Epoch: 1, Ranges: lease.Ranges{lease.FullRing}, TTL: time.Second, ValidFrom: noon}
	g.Set(lease.Lease{Epoch: 2, Ranges: lease.Ranges{{Start: 1, End: 2}}, TTL: time.Minute, ValidFrom: noon})
	sc := &Scanner{cfg: Config{QueryTimeout: 200 * time.Millisecond, Clock: clock}.WithDefaults(), guard: g, inflight: newInflight()}
	settle := sc.settleOn(42, held, "x")
	ran := 0
	write := func(context.Context) error { ran++; return nil }
	if err := settle(context.Background(), write); err != nil || ran != 1 {
		t.Fatalf("write under the still valid running lease: err %v, ran %d", err, ran)
	}
	clock.Advance(800 * time.Millisecond) // 200 ms left: less than timeout + margin
	if err := settle(context.Background(), write); !lease.IsGuardError(err) || ran != 1 {
		t.Fatalf("write after the running lease ran short: err %v, ran %d; want a guard refusal", err, ran)
	}
}

// TestDrainDoesNotWaitForRowsQueuedForAToken: a worker under a tiny rate limit has rows queued
// for a throttle token when a rebalance takes their token away. Drain returns without waiting
// for the tokens (before, it waited until the old lease ran out), and none of those rows is
// executed or marked afterwards, even once tokens come.
func TestDrainDoesNotWaitForRowsQueuedForAToken(t *testing.T) {
	e := newEnv(t, 1, noon)
	txs := ids("tx", 8)
	e.record("pod-a", e.win(window.DateOf(noon), 660), 1000, txs...)
	token := cassandra.Token("pod-a")

	g := e.guard(fullRing(), 0, 1, time.Hour)
	tiny := 0.001 // a token every 1,000 s
	setControls(g, &lease.Controls{RatePerS: &tiny})
	ex := &recordingExecutor{}
	cfg := e.config("w1")
	cfg.Concurrency = 4
	sc := e.scanner(cfg, g, ex)
	done := make(chan error, 1)
	go func() { _, err := sc.Cycle(context.Background()); done <- err }()
	for len(sc.tokenTurn) == 0 { // a row is waiting for its token
		select {
		case err := <-done:
			t.Fatalf("cycle ended before any row waited for a token: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	old, _ := g.Current()
	next := old
	next.Epoch = 2
	next.Ranges = lease.Ranges{lease.FullRing}.Subtract(lease.Ranges{{Start: token, End: token}})
	g.Set(next)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a bound, not a timing
	defer cancel()
	if err := sc.Drain(ctx, old, next); err != nil {
		t.Fatalf("Drain with rows queued for a token: %v", err)
	}

	plenty := 1000.0
	setControls(g, &lease.Controls{RatePerS: &plenty}) // the tokens come after Drain returned
	if err := <-done; err != nil && !lease.IsGuardError(err) {
		t.Fatalf("cycle: %v", err)
	}
	if runs := ex.runs(); len(runs) != 0 {
		t.Errorf("executed after Drain returned: %v", runs)
	}
	for _, id := range txs {
		if m, ok := e.marker(id); ok {
			t.Errorf("%s marked %+v after Drain returned", id, m)
		}
	}
}
