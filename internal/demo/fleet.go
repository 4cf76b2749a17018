package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
)

// fleetOptions is the demo's cluster: its coordinators, workers on its flags (added by startFleet,
// once the coordinators are up) and a stub downstream that behaves as cfg says.
func fleetOptions(cfg Config) proc.Options {
	return proc.Options{
		Binary: cfg.Binary, Coordinators: cfg.Coordinators, Workers: -1,
		// createKeyspace applied the schema, refusing a keyspace that exists already.
		Cassandra: cfg.Cassandra, Keyspace: cfg.Keyspace, SkipSchema: true,
		Ring: cfg.Ring, WindowMinutes: cfg.WindowMinutes, Concurrency: cfg.WorkerConcurrency,
		CoordinatorArgs: cfg.CoordinatorArgs,
		WorkerArgs:      append([]string{"--max-clock-offset", cfg.MaxClockOffset.String()}, cfg.WorkerArgs...),
		Downstream:      downstream.Config{PermanentFraction: cfg.PermanentFraction, Latency: cfg.Latency, Jitter: cfg.Jitter},
	}
}

// startFleet starts the stub and the coordinators in g, then the workers, and waits for a settled
// ring, saying each step.
func (r *runner) startFleet(ctx context.Context, g *proc.Group) error {
	ctx, cancel := context.WithTimeout(ctx, setupWait)
	defer cancel()
	c, err := proc.StartCluster(ctx, g, fleetOptions(r.cfg))
	if err != nil {
		return fmt.Errorf("demo: start coordinators: %w", err)
	}
	r.cluster = c
	if r.cfg.Duration503 > 0 {
		c.Downstream.SetUnavailable(true)
	}
	co, err := c.WaitLeader(ctx)
	if err != nil {
		return fmt.Errorf("demo: no coordinator leader: %w", err)
	}
	r.screen.say(fmt.Sprintf("%d coordinators up; leader %s; ring page %s", r.cfg.Coordinators, co.ID, co.URL("/")))
	if _, err := c.AddWorkers(ctx, r.cfg.Workers); err != nil {
		return fmt.Errorf("demo: start workers: %w", err)
	}
	v, err := c.WaitSettled(ctx)
	if err != nil {
		return fmt.Errorf("demo: the ring did not settle: %w", err)
	}
	ring, _ := c.RingOf(v)
	r.screen.say(fmt.Sprintf("%d workers hold the whole ring (generation %d); downstream stub at %s",
		r.cfg.Workers, ring.Generation, c.Downstream.URL()))
	return nil
}

// stopFleet ends every process: gracefully once the fleet started (workers leave the ring, then
// the coordinators stop, each bounded by StopWait), and at once whatever a failed start left in g.
func (r *runner) stopFleet(g *proc.Group) {
	if r.cluster == nil {
		_ = g.Close()
		return
	}
	_ = r.cluster.Stop(r.cfg.StopWait)
	_ = r.cluster.Close()
}

// leaderPoll keeps the leader and its view fresh for the frames.
type leaderPoll struct {
	mu   sync.Mutex
	co   *proc.Coordinator
	view admin.RingView
}

// run polls c every period until ctx ends.
func (l *leaderPoll) run(ctx context.Context, c *proc.Cluster, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		co, v, err := c.Leader(pctx)
		cancel()
		l.mu.Lock()
		if err == nil {
			l.co, l.view = co, v
		} else if l.co != nil && !l.co.Running() {
			l.co = nil
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// last is the leader as last polled (nil while none is known) and its view.
func (l *leaderPoll) last() (*proc.Coordinator, admin.RingView) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.co, l.view
}
