package demo

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// faults kills a worker and the coordinator leader, each the same way: SIGKILL, watch what the
// others do without it, launch it again. Each kill waits for its time in the schedule and then for
// what it is meant to interrupt: the worker is killed at the moment the downstream has a call of
// its under way (held there for that moment), the leader once the worker is back and the ring
// settled again, so that the two never blur into one longer outage. It keeps the process states
// the frames show beside the ring ("killed", "restarting") and what the summary says of the kills.
type faults struct {
	cfg   Config
	event func(format string, args ...any)
	now   func() time.Time
	// drained is closed once every recorded transaction is done or dead-lettered: a kill still
	// waiting for an execution to interrupt then has none left to wait for.
	drained <-chan struct{}

	// Touched by the run's loop only.
	workerKilled, leaderKilled bool
	// running are the goroutines that watch and restart: waited for before the processes stop.
	running sync.WaitGroup

	mu       sync.Mutex
	pending  int // kills whose process is not back yet
	states   map[string]string
	killed   string // the worker killed, and the executions it had under way then
	inFlight int
	last     time.Time
}

func newFaults(cfg Config, event func(format string, args ...any), drained <-chan struct{}) *faults {
	return &faults{cfg: cfg, event: event, now: cfg.Now, drained: drained, states: map[string]string{}}
}

// fault is one kill → observe → restart.
type fault struct {
	// name is the process as the frames show it; p is its process.
	name string
	p    *proc.Process
	// killed is the event that reports the kill.
	killed string
	// observe watches the cluster while the process is down; nil for nothing to watch.
	observe func(ctx context.Context, killedAt time.Time)
	// restartAfter is when, counted from the kill, the process is launched again.
	restartAfter time.Duration
	// answer waits until the relaunched process answers; back reports it, and what follows.
	answer func(ctx context.Context) error
	back   func(ctx context.Context)
}

// due starts every fault whose time has come and whose work is under way, since being how long
// the first window has been open: the worker kill then waits for the next execution; the leader
// kill comes once the worker kill is over (its process back, or given up on).
func (f *faults) due(ctx context.Context, c *proc.Cluster, since time.Duration) {
	if f.cfg.NoFaults {
		return
	}
	if !f.workerKilled && since >= f.cfg.Schedule.WorkerKill {
		f.workerKilled = true
		f.killWorkerUnderWay(ctx, c)
	}
	if !f.leaderKilled && f.workerKilled && f.idle() && since >= f.cfg.Schedule.LeaderKill {
		f.leaderKilled = true
		f.killLeader(ctx, c)
	}
}

// idle reports whether no fault is waiting, watching or restarting.
func (f *faults) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending == 0
}

// over reports whether every scheduled fault was injected and its process is back (or given up
// on).
func (f *faults) over() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.NoFaults || f.workerKilled && f.leaderKilled && f.pending == 0
}

// wait waits until no fault is watching or restarting any more.
func (f *faults) wait() { f.running.Wait() }

// state is what the frames show for a process beside its own state; "" for nothing.
func (f *faults) state(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.states[name]
}

func (f *faults) setState(name, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == "" {
		delete(f.states, name)
	} else {
		f.states[name] = state
	}
}

// outcome is what the summary says of the kills: the worker killed, the executions it had under
// way at the downstream then, and when the last fault happened.
func (f *faults) outcome() (killed string, inFlight int, last time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.killed, f.inFlight, f.last
}

// inject kills d's process and reports it; then, on a goroutine of its own, observes, waits until
// restartAfter has passed since the kill, launches the process again and reports it back. It
// reports whether the kill was done.
func (f *faults) inject(ctx context.Context, d fault) bool {
	killedAt := f.now()
	if err := d.p.Kill9(); err != nil {
		f.event("kill -9 %s failed: %v", d.name, err)
		return false
	}
	f.mu.Lock()
	f.last = killedAt
	f.pending++
	f.mu.Unlock()
	f.setState(d.name, "killed")
	f.event("%s", d.killed)
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		defer func() {
			f.mu.Lock()
			f.pending--
			f.mu.Unlock()
		}()
		wctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if d.observe != nil {
			d.observe(wctx, killedAt)
		}
		if !wallclock.Sleep(ctx, max(d.restartAfter-f.now().Sub(killedAt), 0)) {
			return
		}
		f.setState(d.name, "restarting")
		if err := d.p.Restart(); err != nil {
			f.event("restart %s failed: %v", d.name, err)
			return
		}
		if err := d.answer(wctx); err != nil {
			f.event("restarted %s does not answer: %v", d.name, err)
			return
		}
		f.setState(d.name, "")
		d.back(wctx)
	}()
	return true
}

// killWorkerUnderWay waits, on a goroutine of its own, for the next call a worker sends the
// downstream, and kills that worker while the downstream holds the call: the kill interrupts an
// execution for certain, whenever the worker's rows come (a window opening, a breaker's probe).
// When the drain ends first there is nothing left to interrupt, and the kill is skipped.
func (f *faults) killWorkerUnderWay(ctx context.Context, c *proc.Cluster) {
	f.mu.Lock()
	f.pending++
	f.mu.Unlock()
	f.running.Add(1)
	go func() {
		defer f.running.Done()
		defer func() {
			f.mu.Lock()
			f.pending--
			f.mu.Unlock()
		}()
		for {
			held, release := c.Downstream.HoldNext()
			select {
			case e := <-held:
				ok := f.killWorker(ctx, c, e.WorkerID)
				release() // its connection is gone with the worker: the call ends aborted
				if ok {
					return
				}
			case <-f.drained:
				release()
				f.event("worker kill skipped: the drain ended before a worker had an execution under way")
				return
			case <-ctx.Done():
				release()
				return
			}
		}
	}()
}

// killWorker kills worker id, one of whose calls the downstream holds; it comes back as a new
// incarnation, which gets ranges only once the old one's lease expired. It reports whether it
// killed it (false: not a running worker of the cluster).
func (f *faults) killWorker(ctx context.Context, c *proc.Cluster, id string) bool {
	var victim *proc.Worker
	for _, w := range c.Workers() {
		if w.ID == id && w.Running() {
			victim = w
		}
	}
	if victim == nil {
		return false
	}
	inFlight := 0
	for _, e := range c.Downstream.ExecutionsBy(id) {
		if e.Running() {
			inFlight++
		}
	}
	ok := f.inject(ctx, fault{
		name: victim.ID, p: victim.Process,
		killed: fmt.Sprintf("kill -9 worker %s (pid %d) with %d executions under way at the downstream: its ranges move once its last lease (one TTL) has expired",
			victim.ID, victim.Pid(), inFlight),
		restartAfter: f.cfg.Schedule.WorkerRestart,
		answer:       func(ctx context.Context) error { return c.WaitWorker(ctx, victim) },
		back: func(ctx context.Context) {
			f.event("worker %s restarted (pid %d, a new incarnation): it gets ranges only after the old incarnation's lease expired", victim.ID, victim.Pid())
			if v, err := c.WaitSettled(ctx); err == nil {
				ring, _ := c.RingOf(v)
				f.event("ring settled again: %d workers cover the ring (generation %d)", f.cfg.Workers, ring.Generation)
			}
		},
	})
	if ok {
		f.mu.Lock()
		f.killed, f.inFlight = victim.ID, inFlight
		f.mu.Unlock()
	}
	return ok
}

// killLeader kills the coordinator leader and reports the election of the next one; the old
// leader comes back as a follower.
func (f *faults) killLeader(ctx context.Context, c *proc.Cluster) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	co, _, err := c.Leader(lctx)
	cancel()
	if err != nil {
		f.event("no leader to kill: %v", err)
		return
	}
	f.inject(ctx, fault{
		name: co.ID, p: co.Process,
		killed: fmt.Sprintf("kill -9 coordinator leader %s (pid %d): workers keep their leases while the others elect a new leader", co.ID, co.Pid()),
		observe: func(ctx context.Context, killedAt time.Time) {
			if next, err := c.WaitLeader(ctx); err == nil {
				_, v, _ := c.Leader(ctx)
				f.event("coordinator %s is the new leader (term %d), %v after the kill; ring page now %s",
					next.ID, v.RaftTerm, f.now().Sub(killedAt).Round(10*time.Millisecond), next.URL("/"))
			}
		},
		restartAfter: f.cfg.Schedule.LeaderRestart,
		answer:       co.WaitHealthy,
		back: func(context.Context) {
			f.event("coordinator %s restarted (pid %d): it rejoins from its Raft log as a follower", co.ID, co.Pid())
		},
	})
}
