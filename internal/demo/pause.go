package demo

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"sync"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
)

// pause is an operator's pause of the ring during the drain, the way a person does it: `retryring
// ctl pause` against the leader's admin address, PauseFor later `retryring ctl resume`. What it
// shows is how soon the workers obey: an execution may still start within one renewal of the
// commit (the controls travel in the next lease element), none after that. So it pauses only
// while executions are under way: after its time in the schedule, once the downstream answers
// 200 again and no kill is under way, at the next call that reaches it.
type pause struct {
	mu        sync.Mutex
	started   bool
	pausedAt  time.Time
	resumedAt time.Time
	err       error
	skipped   bool // the drain ended before an execution came to pause
}

// due starts the pause once, on a goroutine of its own, when its time in the schedule has come
// and ready (the downstream recovered, no kill under way); the goroutine waits for an execution
// under way.
func (p *pause) due(ctx context.Context, r *runner, since time.Duration, ready bool) {
	s := r.cfg.Schedule
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || s.PauseFor == 0 || since < s.Pause || !ready {
		return
	}
	p.started = true
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		p.run(ctx, r, s.PauseFor)
	}()
}

func (p *pause) run(ctx context.Context, r *runner, d time.Duration) {
	held, release := r.cluster.Downstream.HoldNext()
	select {
	case <-held:
		release() // the call goes on at once: it only says executions are under way
	case <-r.drained:
		release()
		p.mu.Lock()
		p.skipped = true
		p.mu.Unlock()
		r.event("ctl pause skipped: the drain ended before an execution came to pause")
		return
	case <-ctx.Done():
		release()
		return
	}
	leader, err := r.cluster.WaitLeader(ctx)
	if err == nil {
		err = r.ctl(ctx, "pause", leader, "--reason", "demo: an operator pauses the retries")
	}
	if err != nil {
		p.fail(r, err)
		return
	}
	at := r.now()
	p.mu.Lock()
	p.pausedAt = at
	p.mu.Unlock()
	r.event("ctl pause %s: the workers start nothing new within one renewal (%v); rows stay, no attempt is used", r.cfg.Ring, r.renewal())
	if !wallclock.Sleep(ctx, d) {
		return
	}
	if leader, err = r.cluster.WaitLeader(ctx); err == nil {
		err = r.ctl(ctx, "resume", leader)
	}
	if err != nil {
		p.fail(r, err)
		return
	}
	p.mu.Lock()
	p.resumedAt = r.now()
	p.mu.Unlock()
	r.event("ctl resume %s after %v", r.cfg.Ring, d)
}

// over reports whether the pause is done with: never started, resumed, failed or skipped.
func (p *pause) over() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.started || !p.resumedAt.IsZero() || p.err != nil || p.skipped
}

func (p *pause) fail(r *runner, err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	r.event("ctl pause/resume failed: %v", err)
}

// outcome is the pause as the summary shows it: how long the ring was paused, and the executions
// that reached the downstream later than one renewal after the pause and before the resume.
func (p *pause) outcome(starts []time.Time, renewal time.Duration) (paused time.Duration, late int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pausedAt.IsZero() || p.resumedAt.IsZero() || p.err != nil {
		return 0, 0, false
	}
	obeyBy := p.pausedAt.Add(renewal)
	for _, t := range starts {
		if t.After(obeyBy) && t.Before(p.resumedAt) {
			late++
		}
	}
	return p.resumedAt.Sub(p.pausedAt), late, true
}

// renewal is the renewal period of the demo's coordinators: a pause is obeyed within one.
func (r *runner) renewal() time.Duration {
	if d := r.cluster.Options().LeaseRenewal; d > 0 {
		return d
	}
	return lease.DefaultRenewal
}

// ctl runs `retryring ctl <verb> --ring R --coordinator <leader> args...` as a process of the
// run's group, its output in the log directory.
func (r *runner) ctl(ctx context.Context, verb string, leader *proc.Coordinator, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := r.cluster.Group.Run(ctx, proc.Spec{
		Name: "ctl-" + verb, Path: r.cfg.Binary, LogDir: r.logDir,
		Args: append([]string{"ctl", verb, "--ring", r.cfg.Ring.String(), "--coordinator", leader.URL("")}, args...),
	})
	return err
}
