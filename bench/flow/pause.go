package main

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker"
)

// The timing in force in the pause run: the fleet passes no timing flag, so the coordinators
// renew on lease.DefaultRenewal and the workers time executions out at worker.DefaultExecTimeout.
const (
	renewal     = lease.DefaultRenewal
	execTimeout = worker.DefaultExecTimeout
	// pauseGoal is issue 9's goal for the time from the pause to the last execution that began.
	pauseGoal = renewal + execTimeout
	// hold is how long each pause lasts: past the goal, so that a start that misses it is seen.
	hold = pauseGoal + time.Second
	// flowing is how recent an execution must be for the work to count as flowing.
	flowing = 500 * time.Millisecond
)

// trial is one pause: when `ctl pause` started and returned, the last execution that began
// before the resume, and the executions that began later than one renewal after the return.
type trial struct {
	phase            time.Duration // the random wait after work was seen flowing
	started, ret     time.Time
	last             time.Time
	anyStart         bool
	late             int
	startsDuringCall int
}

func (t trial) fromReturn() time.Duration { return t.last.Sub(t.ret) }
func (t trial) fromStart() time.Duration  { return t.last.Sub(t.started) }

type pauseResult struct {
	rows    int
	trials  []trial
	skipped int // trials with no work flowing before the pause
	drained time.Duration
	acc     accounting
}

// pauses runs n pause trials on a fleet of workers with rows flowing: each waits until an
// execution began within the last 500 ms plus a random phase in [0, renewal) (the pause lands
// anywhere between two renewals), pauses with `ctl pause`, holds the pause for hold, reads the
// stub's call log, and resumes with `ctl resume`. Then it waits until every row was done once.
func (e *env) pauses(ctx context.Context, n, rows, workers int, rnd *rand.Rand) (pauseResult, error) {
	res := pauseResult{rows: rows}
	f, err := e.start(ctx, "pause", "", workers, downstream.Config{Latency: 50 * time.Millisecond, Jitter: 100 * time.Millisecond})
	if err != nil {
		return res, err
	}
	defer f.close()
	view, err := f.WaitSettled(ctx)
	if err != nil {
		return res, err
	}
	l := equal(workers, rows, 10)
	ps, err := place(f.Cluster, view, l, "")
	if err != nil {
		return res, err
	}
	if err := record(ctx, e.session, f.Cluster, ps); err != nil {
		return res, err
	}
	ids := allIDs(ps)
	res.rows = len(ids)
	for i := range n {
		if !waitFlowing(ctx, f, time.Minute) {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.skipped++
			continue
		}
		t := trial{phase: time.Duration(rnd.Int64N(int64(renewal)))}
		if !wallclock.Sleep(ctx, t.phase) {
			return res, ctx.Err()
		}
		var err error
		t.started, t.ret, err = f.ctl(ctx, fmt.Sprintf("ctl-pause-%d", i+1), "pause", "--reason", "bench/flow")
		if err != nil {
			return res, err
		}
		if !wallclock.Sleep(ctx, time.Until(t.ret.Add(hold))) {
			return res, ctx.Err()
		}
		s := startsSince(f, t.started.Add(-time.Minute))
		t.last, t.anyStart = s.last(time.Now())
		t.late = s.in(t.ret.Add(renewal), time.Now())
		t.startsDuringCall = s.in(t.started, t.ret)
		if _, _, err := f.ctl(ctx, fmt.Sprintf("ctl-resume-%d", i+1), "resume"); err != nil {
			return res, err
		}
		res.trials = append(res.trials, t)
	}
	res.drained, res.acc = f.waitDrained(ctx, ids, 15*time.Minute)
	return res, ctx.Err()
}

// waitFlowing waits until an execution began within the last flowing, for at most bound.
func waitFlowing(ctx context.Context, f *fleet, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		if len(f.Downstream.ExecutionsSince(time.Now().Add(-flowing))) > 0 {
			return true
		}
		if !wallclock.Sleep(ctx, 20*time.Millisecond) {
			return false
		}
	}
	return false
}

func startsSince(f *fleet, t time.Time) starts {
	var ts []time.Time
	for _, x := range f.Downstream.ExecutionsSince(t) {
		ts = append(ts, x.Start)
	}
	return sortedStarts(ts)
}

func printPause(w io.Writer, r pauseResult, seed uint64) {
	fmt.Fprintf(w, "\n### Pause: from `ctl pause` to the last execution that began anywhere (goal ≤ renewal %v + execution timeout %v = %v)\n\n", renewal, execTimeout, pauseGoal)
	var fromRet, fromStart []time.Duration
	late, met := 0, 0
	for _, t := range r.trials {
		if !t.anyStart {
			continue
		}
		fromRet = append(fromRet, t.fromReturn())
		fromStart = append(fromStart, t.fromStart())
		late += t.late
		if t.fromReturn() <= pauseGoal {
			met++
		}
	}
	fmt.Fprintln(w, "| trials | from the call's return: min / median / max | from the call's start: min / median / max | trials within the goal | executions begun > 1 renewal after the return (invariant 10, goal 0) | rows | drained after the last resume | lost | executed twice |")
	fmt.Fprintln(w, "|---:|---|---|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(w, "| %d (%d skipped: no work flowing) | %s | %s | %d of %d | %d | %d | %v | %d | %d |\n",
		len(r.trials), r.skipped, spread(fromRet), spread(fromStart), met, len(fromRet), late, r.rows,
		r.drained.Round(time.Second), r.acc.lost(), r.acc.twice)
	fmt.Fprintf(w, "\nRaw values (seed %d; ms; the call's own time is start → return; negative: the last execution began before that instant):\n\n", seed)
	fmt.Fprintln(w, "| trial | phase | call took | last start − return | last start − call start | starts during the call | starts > 1 renewal after the return |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	for i, t := range r.trials {
		last := "none"
		lastS := "none"
		if t.anyStart {
			last, lastS = ms(t.fromReturn()), ms(t.fromStart())
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %d | %d |\n", i+1, ms(t.phase), ms(t.ret.Sub(t.started)), last, lastS, t.startsDuringCall, t.late)
	}
	fmt.Fprintf(w, "\n%d calls in all, %d rows done of %d, %d contract violations\n", r.acc.calls, r.acc.done, r.acc.rows, r.acc.violations)
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("%s / %s / %s ms", ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
