package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

// result is one mode's run.
type result struct {
	mode     string
	keyspace string
	marks    []phaseMark // the start of each phase, then "end"
	steps    []step
	// recorded failures, failed writes, and whether every recorded one was done in the bound.
	recorded, recordErrs int
	lastRecordErr        error
	drained              bool
	ids                  []string
	execs                []downstream.Execution
}

// phaseMark is what was counted when a phase began.
type phaseMark struct {
	name   string
	counts counts
	gaps   []proc.Gap // lease gaps by the workers' view, whole run so far
}

// step is one worker's restart.
type step struct {
	worker  string
	at      time.Time
	stopped time.Duration // SIGTERM to the process's exit
	holding time.Duration // SIGTERM to the new incarnation active with ranges in the leader's view
}

// phase is the stretch between two marks, with what was counted in it.
type phase struct {
	name     string
	from, to time.Time
	counts   counts
	// longestGap is the longest stretch some part of the ring had no usable lease, among the gaps
	// that began in the phase.
	longestGap time.Duration
	gaps       int
	// windows that became readable in the phase, and the delays of their executions.
	windows int
	delays  []time.Duration
}

// phases splits a result at its marks; the executions of a window count in the phase in which the
// window became readable (its start plus max_clock_offset; the last phase takes every window
// after its start).
func (r result) phases() []phase {
	var out []phase
	last := r.marks[len(r.marks)-1]
	for i := 0; i+1 < len(r.marks); i++ {
		m, next := r.marks[i], r.marks[i+1]
		p := phase{name: m.name, from: m.counts.at, to: next.counts.at, counts: next.counts.sub(m.counts)}
		for _, g := range last.gaps {
			// A gap is first seen by a sample that may have begun up to one period before the
			// fault that made it.
			if from := g.From.Add(samplePeriod); !from.Before(p.from) && from.Before(p.to) {
				p.gaps++
				p.longestGap = max(p.longestGap, g.Length())
			}
		}
		out = append(out, p)
	}
	starts := map[time.Time]bool{}
	for _, d := range r.firstDone() {
		i := len(out) - 1
		for i > 0 && d.window.Add(worker.DefaultMaxClockOffset).Before(out[i].from) {
			i--
		}
		out[i].delays = append(out[i].delays, d.delay)
		if !starts[d.window] {
			starts[d.window] = true
			out[i].windows++
		}
	}
	for i := range out {
		slices.Sort(out[i].delays)
	}
	return out
}

// doneExec is the first done execution of a transaction: its window's start and its delay from it.
type doneExec struct {
	window time.Time
	delay  time.Duration
}

// firstDone lists, per transaction of the run, its first done execution.
func (r result) firstDone() []doneExec {
	seen := map[string]bool{}
	var out []doneExec
	for _, e := range r.execs {
		if !e.Done() || seen[e.TransactionID] {
			continue
		}
		seen[e.TransactionID] = true
		d, err := window.ParseDate(e.WindowDate)
		if err != nil {
			continue
		}
		w, err := window.New(d, e.WindowMinute, 1)
		if err != nil {
			continue
		}
		out = append(out, doneExec{window: w.Start(), delay: e.Start.Sub(w.Start())})
	}
	return out
}

// accounting is the end of a run: executed twice, lost.
func (r result) accounting() (done, twice, lost int) {
	twice = len(downstream.Duplicates(r.execs))
	doneIDs := map[string]bool{}
	for _, e := range r.execs {
		if e.Done() {
			doneIDs[e.TransactionID] = true
		}
	}
	for _, id := range r.ids {
		if doneIDs[id] {
			done++
		} else {
			lost++
		}
	}
	return done, twice, lost
}

// quantile is the q-quantile of sorted ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[max(0, int(math.Ceil(q*float64(len(ds))))-1)]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// share is tokens as a percentage of the ring.
func share(tokens float64) string { return fmt.Sprintf("%.1f %%", 100*tokens/math.Pow(2, 64)) }

func printResults(w io.Writer, rs []result) {
	fmt.Fprintln(w, "\nPer phase (a window's executions count in the phase in which the window became readable; delay: from the window's start to the call reaching the stub)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | phase | length | ring given to a new member (coordinators' counter) | ring moved to another worker id (leader's view) | new epochs / range changes (leader's view) | instances scanned | re-scanned after a start | re-scanned after a handover | lease gaps (workers' view): count, longest | windows | executions | delay p50 / p99 / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		for _, p := range r.phases() {
			c := p.counts
			delay := "—"
			if len(p.delays) > 0 {
				delay = fmt.Sprintf("%s / %s / %s", secs(quantile(p.delays, 0.5)), secs(quantile(p.delays, 0.99)), secs(p.delays[len(p.delays)-1]))
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.1f %% | %d / %d | %.0f | %.0f | %.0f | %d, %s | %d | %d | %s |\n",
				r.mode, p.name, p.to.Sub(p.from).Round(time.Second), share(c.moved), 100*c.idMoved, c.epochs, c.ranges,
				c.worker[scanned], c.worker[rescanStart], c.worker[rescanHandover], p.gaps, secs(p.longestGap),
				p.windows, len(p.delays), delay)
		}
	}
	fmt.Fprintln(w, "\nWhole run")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | keyspace | recorded (failed writes) | done | executed twice | lost | restart steps: SIGTERM to exit, mean / max | SIGTERM to holding a lease again, mean / max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		done, twice, lost := r.accounting()
		var stopped, holding []time.Duration
		for _, s := range r.steps {
			stopped, holding = append(stopped, s.stopped), append(holding, s.holding)
		}
		fmt.Fprintf(w, "| %s | `%s` | %d (%d) | %d | %d | %d | %s | %s |\n", r.mode, r.keyspace, r.recorded, r.recordErrs,
			done, twice, lost, meanMax(stopped), meanMax(holding))
	}
	for _, r := range rs {
		if r.lastRecordErr != nil {
			fmt.Fprintf(w, "\n%s: last failed write: %v\n", r.mode, r.lastRecordErr)
		}
		if !r.drained {
			fmt.Fprintf(w, "\n%s: not every recorded failure was done within the drain bound\n", r.mode)
		}
	}
}

func meanMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "—"
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("%s / %s", secs(sum/time.Duration(len(ds))), secs(slices.Max(ds)))
}
