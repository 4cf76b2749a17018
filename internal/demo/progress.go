package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/worker"
)

// Bounds of the loop and of its frames.
const (
	// cleanupWait bounds the wait, after the drain, for the workers to delete the buckets they
	// finished (tiers 3-5 of open windows), counted from the last deletion seen: on a busy
	// machine the deletions take longer, and the wait lasts as long as they go on.
	cleanupWait = 20 * time.Second
	// tableWindows is how many windows the terminal table shows.
	tableWindows = 6
)

// progress is where the run's loop stands, tick after tick: what the frames, the phase and the end
// of the run are decided from. Only the loop's goroutine touches it.
type progress struct {
	burstDone bool
	// drainStart is when the burst's first window opens to the workers; drainedAt when every
	// recorded transaction was done or dead-lettered (zero before).
	drainStart, drainedAt time.Time
	// recovered: the downstream answers 200 again (or never answered 503); the outage it ended
	// began with the first refused call, at outageFrom, and refused outageRefused calls.
	recovered     bool
	outageFrom    time.Time
	recoveredAt   time.Time
	outageRefused int
	faultsOver    bool
	// execRate is executions per second since the previous tick, at lastTick with lastExecs.
	execRate  float64
	lastExecs int
	lastTick  time.Time
	// plainTable is when the per-window table was last printed (output that is not a terminal).
	plainTable time.Time
	// cleanupFrom is when the wait for the workers' deletions began; cleanupSeen when the rows
	// left in open windows were last seen fewer, cleanupLeft how many they were then.
	cleanupFrom, cleanupSeen time.Time
	cleanupLeft              int
	// replay is the replay of the dead letters once the rest drained; pause an operator's pause
	// of the ring during the drain.
	replay replay
	pause  pause
}

// drive records the burst, shows progress, runs the faults, and returns the summary once
// every transaction finished (or the timeout passed, or ctx ended).
func (r *runner) drive(ctx context.Context) (Summary, error) {
	cfg := r.cfg
	r.burst = newBurst(cfg, r.store, r.event)
	recorded := make(chan error, 1)
	go func() { recorded <- r.burst.record(ctx) }()

	p := &r.progress
	p.recovered, p.lastTick = cfg.Duration503 == 0, r.now()
	tick := time.NewTicker(cfg.Refresh)
	defer tick.Stop()
	for {
		now := r.now()
		select {
		case err := <-recorded:
			p.burstDone = true
			if err != nil {
				return Summary{}, err
			}
			p.drainStart = r.burst.drainStart(now)
			r.event("burst recorded: %s failures in %v into %s; workers open the first one at %s UTC (in %s)",
				num(r.burst.written()), r.burst.took.Round(time.Millisecond), r.burst.windows(),
				p.drainStart.UTC().Format("15:04:05"), clock(p.drainStart.Sub(now)))
		default:
		}

		if !p.recovered {
			r.endOutage(now)
		}
		if p.burstDone && !now.Before(p.drainStart) {
			r.insp.rows.Store(true)
			since := now.Sub(p.drainStart)
			r.faults.due(ctx, r.cluster, since)
			// The pause waits for the faults too: an election under way would blur what it shows.
			p.pause.due(ctx, r, since, p.recovered && r.faults.idle())
		}

		ledger := r.ledger(now)
		p.faultsOver = r.faults.over()
		if p.burstDone && p.drainedAt.IsZero() && ledger.Lost == 0 && ledger.Recorded > 0 {
			p.drainedAt = now
			close(r.drained)
			r.event("drained: every recorded transaction is done or dead-lettered, %v after the first window opened",
				now.Sub(p.drainStart).Round(time.Second))
		}
		finished := false
		if !p.drainedAt.IsZero() && p.faultsOver && ledger.DeadLettered > 0 && !cfg.NoReplay && p.replay.started.IsZero() {
			p.replay.start(ctx, r)
		}
		// Once started, the replay is waited for even after its steps left the dead-lettered
		// count (done since, they count as done).
		replayOver := p.replay.started.IsZero() || p.replay.over(now, r.cluster.Downstream.Executions())
		if !p.drainedAt.IsZero() && p.faultsOver && replayOver && p.pause.over() {
			lo, err := r.insp.leftover(ctx)
			left := lo.Rows - lo.RowsNotOpen
			if p.cleanupFrom.IsZero() {
				p.cleanupFrom, p.cleanupSeen, p.cleanupLeft = now, now, math.MaxInt
			}
			if err == nil && left < p.cleanupLeft {
				p.cleanupSeen, p.cleanupLeft = now, left
			}
			finished = (err == nil && left == 0) || now.Sub(p.cleanupSeen) >= cleanupWait
		}

		p.execRate = 0
		if dt := now.Sub(p.lastTick).Seconds(); dt > 0 {
			p.execRate = float64(ledger.Executions-p.lastExecs) / dt
		}
		p.lastExecs, p.lastTick = ledger.Executions, now
		v := r.view(now, ledger)
		if !r.screen.tty && now.Sub(p.plainTable) >= 10*time.Second && len(ledger.Windows) > 0 {
			p.plainTable = now
			r.screen.say(windowLines(ledger, now)...)
		}
		r.screen.frame(v)

		timedOut := p.burstDone && now.Sub(p.drainStart) > cfg.Timeout
		if finished || timedOut || ctx.Err() != nil {
			if !p.burstDone {
				// It ends with ctx; its writes must be over before finish reads them.
				if err := <-recorded; err != nil && !errors.Is(err, context.Canceled) {
					r.event("recording stopped: %v", err)
				}
			}
			if timedOut && p.drainedAt.IsZero() {
				r.event("timeout: %s transactions not finished %v after the first window opened", num(ledger.Lost), cfg.Timeout)
			}
			return r.finish(ctx)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// outageRefusals is how many calls the downstream refuses at least before it recovers (fewer
// for a smaller burst): the outage is about the failures it turns away, and so it lasts until it
// turned some away, however long the workers took to come (a kill, an election, a slow machine).
const outageRefusals = 10

// endOutage lets the downstream recover once it has refused outageRefusals calls (or the whole
// burst) and Duration503 has passed since the first of them.
func (r *runner) endOutage(now time.Time) {
	p := &r.progress
	n, first := r.cluster.Downstream.Refusals()
	if n < min(outageRefusals, r.cfg.Count) || now.Sub(first) < r.cfg.Duration503 {
		return
	}
	p.recovered, p.outageFrom, p.recoveredAt, p.outageRefused = true, first, now, n
	r.cluster.Downstream.SetUnavailable(false)
	r.event("downstream recovered after refusing %s calls in %v: it answers 200 from now on (what failed meanwhile waits in a later window)",
		num(n), now.Sub(first).Round(100*time.Millisecond))
}

// ledger gathers the accounting inputs and computes the ledger.
func (r *runner) ledger(now time.Time) Ledger {
	seen, dead, _ := r.insp.state()
	return account(ledgerInput{
		Now: now, Offset: r.cfg.MaxClockOffset, Length: r.cfg.WindowMinutes,
		Own: r.burst.recorded(), Seen: seen, Execs: r.cluster.Downstream.Executions(), Dead: dead,
	})
}

// view builds a frame.
func (r *runner) view(now time.Time, l Ledger) view {
	p := &r.progress
	co, rv := r.leader.last()
	v := view{
		Now: now, Started: r.started, Keyspace: r.cfg.Keyspace, Ring: r.cfg.Ring, Ledger: l, ExecRate: p.execRate,
		MaxWindows: tableWindows,
	}
	if co != nil && co.Running() {
		v.AdminURL, v.Leader, v.Term = co.URL("/"), co.ID, rv.RaftTerm
		ring, _ := r.cluster.RingOf(rv)
		v.Generation = ring.Generation
		v.Members = members(ring, now)
	}
	switch {
	case p.recovered:
		v.Downstream = fmt.Sprintf("200 OK (%.1f%% of transactions refused with a permanent 422)", 100*r.cfg.PermanentFraction)
	default:
		v.Downstream = r.outageState(now)
	}
	v.Phase = r.phase(now, l)

	nodeState := map[string]string{}
	for _, n := range rv.Coordinators {
		nodeState[n.ID] = n.State
	}
	for _, c := range r.cluster.Coordinators() {
		state := r.faults.state(c.ID)
		switch {
		case state != "":
		case !c.Running():
			state = "down"
		case nodeState[c.ID] != "":
			state = nodeState[c.ID]
		default:
			state = "running"
		}
		v.Coordinators = append(v.Coordinators, procRow{Name: c.ID, State: state})
	}
	for _, w := range r.cluster.Workers() {
		state := r.faults.state(w.ID)
		if state == "" {
			state = map[bool]string{true: "running", false: "down"}[w.Running()]
		}
		v.Workers = append(v.Workers, procRow{Name: w.ID, State: state})
	}
	return v
}

// outageState is the downstream's state during the outage, in words.
func (r *runner) outageState(now time.Time) string {
	n, first := r.cluster.Downstream.Refusals()
	want := min(outageRefusals, r.cfg.Count)
	if n == 0 {
		return fmt.Sprintf("503 Service Unavailable (no call yet; it recovers once it has refused %d and %v has passed since the first refusal)", want, r.cfg.Duration503)
	}
	if n < want {
		return fmt.Sprintf("503 Service Unavailable (%s calls refused; it recovers once it has refused %d)", num(n), want)
	}
	return fmt.Sprintf("503 Service Unavailable (%s calls refused; recovers in %s)", num(n), clock(max(first.Add(r.cfg.Duration503).Sub(now), 0)))
}

// phase says in words what the run is doing.
func (r *runner) phase(now time.Time, l Ledger) string {
	p := &r.progress
	switch {
	case !p.burstDone:
		return fmt.Sprintf("recording the burst: %s of %s failures written", num(r.burst.written()), num(r.cfg.Count))
	case now.Before(p.drainStart):
		return fmt.Sprintf("burst recorded; the workers open its window at %s UTC, in %s (max_clock_offset after its start)",
			p.drainStart.UTC().Format("15:04:05"), clock(p.drainStart.Sub(now)))
	case !p.drainedAt.IsZero() && !p.faultsOver:
		return "drained; the scheduled faults are still under way"
	case !p.replay.started.IsZero() && p.cleanupFrom.IsZero():
		return "drained; the dead letters are replayed and wait for their window"
	case !p.drainedAt.IsZero():
		return "drained; waiting for the workers to delete their finished buckets"
	}
	openPending, next := 0, WindowRow{}
	for _, w := range l.Windows {
		switch {
		case w.Open(now):
			openPending += w.Pending
		case w.Pending > 0 && next.Recorded == 0:
			next = w
		}
	}
	if openPending == 0 && next.Recorded > 0 {
		return fmt.Sprintf("waiting for window %s (%s retries) to open, in %s", windowName(next), num(next.Pending), clock(next.Opens.Sub(now)))
	}
	if !p.recovered {
		return "draining; the downstream answers 503, so each failure is recorded again into a later window"
	}
	return "draining"
}

// finish reads the final state, shows the last frame and builds the summary.
func (r *runner) finish(ctx context.Context) (Summary, error) {
	p := &r.progress
	// The last scan, and the leftover read, run even after an interrupt: they are quick and
	// tell what an interrupted run left.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = r.insp.scan(fctx)
	l := r.ledger(r.now())
	s := newSummary(l)
	s.Keyspace, s.Instances, s.Backdate, s.RecordTime = r.cfg.Keyspace, r.cfg.Instances, r.cfg.Backdate, r.burst.took
	s.Concurrency, s.Kept = r.cfg.WorkerConcurrency, r.cfg.Keep
	var lastFault time.Time
	s.Killed, s.InFlightAtKill, lastFault = r.faults.outcome()
	s.Interrupted = ctx.Err() != nil && p.drainedAt.IsZero()
	if !p.drainedAt.IsZero() {
		s.Drained = true
		s.DrainTime = p.drainedAt.Sub(p.drainStart)
		if !lastFault.IsZero() && p.drainedAt.After(lastFault) {
			s.AfterLastFault = p.drainedAt.Sub(lastFault)
		}
	}
	execs := r.cluster.Downstream.Executions()
	s.MostCalls, s.MostCallsKey = downstream.CallsPerStep(execs)
	repeated := downstream.RepeatedAttempts(execs)
	s.RepeatedAttempts = len(repeated)
	for _, rp := range repeated {
		if s.Killed != "" && rp.Prev.WorkerID == s.Killed {
			s.RepeatedAfterKill++
		}
	}
	s.EarlyCalls = len(downstream.EarlyCalls(execs, r.cfg.WindowMinutes, worker.DefaultMaxRetryDelay))
	s.OutageCalls, _ = r.cluster.Downstream.Refusals()
	if p.recovered && !p.outageFrom.IsZero() {
		s.OutageFor = p.recoveredAt.Sub(p.outageFrom)
	}
	starts := make([]time.Time, len(execs))
	for i, e := range execs {
		starts[i] = e.Start
	}
	s.PausedFor, s.LateUnderPause, s.PauseShown = p.pause.outcome(starts, r.renewal())
	s.BreakerRefused, s.BreakerKnown = r.breakerRefused(fctx)
	s.Replayed, s.ReplayTook = p.replay.outcome()
	s.ReplayedDone = l.ReplayedDone
	s.Leftover, s.LeftoverErr = r.insp.leftover(fctx)
	s.Events = r.screen.Events()
	// The last frame shows no rate, and no fault under way: the run is over.
	p.execRate, p.faultsOver = 0, true
	r.screen.frame(r.view(r.now(), l))
	switch {
	case s.Lost > 0 && !s.Interrupted:
		return s, fmt.Errorf("%w: %d of %d", ErrLost, s.Lost, s.Recorded)
	case s.Interrupted:
		return s, ErrInterrupted
	}
	return s, nil
}

// breakerRefused sums, over the workers running now, the executions their circuit breakers held
// back (retryring_worker_breaker_refused_total): calls a down downstream was spared. A worker
// killed and started again counts from its restart, so the sum is a lower bound; known is false
// when no worker answered.
func (r *runner) breakerRefused(ctx context.Context) (n int, known bool) {
	for _, w := range r.cluster.Workers() {
		if !w.Running() {
			continue
		}
		m, err := w.Metrics(ctx)
		if err != nil {
			continue
		}
		n += int(m.Sum("retryring_worker_breaker_refused_total"))
		known = true
	}
	return n, known
}
