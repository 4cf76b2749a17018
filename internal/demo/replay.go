package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/deadletter"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/recorder"
)

// replayID names the demo's replay run, as an operator's --id would.
const replayID = "demo"

// replayWait bounds the wait for the replayed steps: they are recorded into W+1, so they run
// when it opens, about a window later.
const replayWait = 3 * time.Minute

// replay is the run's last act, what an operator does after an incident: the downstream is
// fixed (the stub accepts the steps it refused for good), the dead letters are replayed with the
// deadletters package (`retryring deadletters replay --id demo`), and the run waits until every
// replayed step is done.
type replay struct {
	mu       sync.Mutex
	started  time.Time
	finished bool // the replay call returned
	ids      map[string]bool
	err      error
	done     time.Time // every replayed step answered done
}

// start fixes the downstream and replays every dead letter of the run, in the background.
func (p *replay) start(ctx context.Context, r *runner) {
	p.mu.Lock()
	p.started = r.now()
	p.ids = map[string]bool{}
	p.mu.Unlock()
	r.cluster.Downstream.SetAcceptPermanent(true)
	r.event("downstream fixed: it accepts the steps it refused; replaying the dead letters (retryring deadletters replay --id %s)", replayID)
	go func() {
		// Unchecked: the demo runs every process on this host, on one clock, beside its own Cassandra.
		rec, err := recorder.New(r.store, recorder.Config{InstanceID: "retryring-deadletters", UncheckedClock: true})
		var res deadletter.ReplayResult
		if err == nil {
			f := deadletter.Filter{Since: r.started.Add(-time.Hour), Until: r.now()}
			res, err = deadletter.Replay(ctx, r.store, rec, f, deadletter.ReplayOptions{
				ID: replayID, Now: r.now,
				Each: func(d cassandra.DeadLetter, o deadletter.Outcome, _ cassandra.BucketKey) {
					if o == deadletter.Replayed || o == deadletter.Unmarked { // both wrote a copy that runs
						p.mu.Lock()
						p.ids[d.Transaction.ID] = true
						p.mu.Unlock()
					}
				},
			})
		}
		p.mu.Lock()
		p.finished, p.err = true, err
		p.mu.Unlock()
		if err != nil {
			r.event("replay failed: %v", err)
			return
		}
		retried := ""
		if res.Retried > 0 {
			retried = fmt.Sprintf(" (%s statements tried again after a busy Cassandra's timeouts)", num(res.Retried))
		}
		r.event("replayed %s dead letters as fresh retries into the next window%s; they run when it opens", num(res.Replayed), retried)
	}()
}

// over reports whether the replay is over at now: it was never started (nothing to replay), or
// every replayed step was answered done, or it failed, or replayWait passed.
func (p *replay) over(now time.Time, execs []downstream.Execution) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.started.IsZero():
		return false
	case !p.finished:
		return false
	case p.err != nil || !p.done.IsZero() || now.Sub(p.started) > replayWait:
		return true
	}
	left := len(p.ids)
	for _, e := range execs {
		if e.Replay > 0 && e.Done() && p.ids[e.TransactionID] {
			left--
		}
	}
	if left <= 0 {
		p.done = now
		return true
	}
	return false
}

// outcome is what the summary says: the dead letters replayed, and how long until all ran.
func (p *replay) outcome() (replayed int, took time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done.IsZero() {
		took = p.done.Sub(p.started)
	}
	return len(p.ids), took
}
