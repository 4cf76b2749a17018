package main

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/downstream"
)

// slice is the span the rate is counted over: the limit's promise is per minute.
const slice = time.Minute

// slidingStep is how far apart the sliding minutes start.
const slidingStep = 100 * time.Millisecond

// rateRun is one run of the rate figure: a layout of pending rows, drained with a ring-wide limit
// (0: none, the baseline).
type rateRun struct {
	layout layout
	limit  float64
	// binary runs the fleet when not "" (-compare), named label in the table.
	binary, label string
}

func (r rateRun) name() string {
	n := fmt.Sprintf("ctl limit %v/s, %s", r.limit, r.layout.name)
	if r.limit == 0 {
		n = "no limit (baseline), " + r.layout.name
	}
	if r.label != "" {
		n += " [" + r.label + "]"
	}
	return n
}

type rateResult struct {
	run                   rateRun
	limit                 float64 // the limit the percentages are of (the baseline: the runs' limit)
	t0, measureEnd        time.Time
	workEnd               time.Time // the last row's done answer began, or measureEnd when rows were left
	ring                  []int     // executions per whole minute slice up to measureEnd
	withWork              int       // how many of those slices had rows pending at their end
	members               []string
	perMember             map[string][]int
	slideMost, slideFewer int
	slideOK, slideWorkOK  bool
	inMeasure, leftAfter  int
	workRate              float64 // executions per second from t0 to workEnd
	drained               time.Duration
	acc                   accounting
}

// rate drains r.layout with r.limit in force from before the first row was written, counts the
// executions that reached the stub per minute slice over measure from the first one, then clears
// the limit and waits until every row was done once.
func (e *env) rate(ctx context.Context, r rateRun, refLimit float64, measure time.Duration) (rateResult, error) {
	res := rateResult{run: r, limit: refLimit, perMember: map[string][]int{}}
	f, err := e.start(ctx, "rate", r.binary, len(r.layout.rows), downstream.Config{Latency: 5 * time.Millisecond})
	if err != nil {
		return res, err
	}
	defer f.close()
	view, err := f.WaitSettled(ctx)
	if err != nil {
		return res, err
	}
	ps, err := place(f.Cluster, view, r.layout, "")
	if err != nil {
		return res, err
	}
	if r.limit > 0 {
		if _, _, err := f.ctl(ctx, "ctl-limit", "limit", "--per-second", strconv.FormatFloat(r.limit, 'f', -1, 64)); err != nil {
			return res, err
		}
	}
	if err := record(ctx, e.session, f.Cluster, ps); err != nil {
		return res, err
	}
	ids := allIDs(ps)
	if err := f.Downstream.WaitExecutions(ctx, func(es []downstream.Execution) bool { return len(es) > 0 }); err != nil {
		return res, err
	}
	res.t0 = f.Downstream.Executions()[0].Start
	res.measureEnd = res.t0.Add(measure)
	for time.Now().Before(res.measureEnd) && len(f.Downstream.DoneIDs()) < len(ids) {
		if !wallclock.Sleep(ctx, time.Second) {
			return res, ctx.Err()
		}
	}
	execs := f.Downstream.Executions()
	if r.limit > 0 {
		if _, _, err := f.ctl(ctx, "ctl-limit-clear", "limit", "--clear"); err != nil {
			return res, err
		}
	}
	res.workEnd = res.measureEnd
	if last, all := allDoneAt(execs, ids); all && last.Before(res.workEnd) {
		res.workEnd = last
	}
	var all []time.Time
	by := map[string][]time.Time{}
	for _, x := range execs {
		if x.Start.Before(res.measureEnd) {
			all = append(all, x.Start)
			by[x.WorkerID] = append(by[x.WorkerID], x.Start)
		}
	}
	s := sortedStarts(all)
	res.inMeasure = len(s)
	res.ring = s.slices(res.t0, res.measureEnd, slice)
	res.withWork = len(s.slices(res.t0, res.workEnd, slice))
	if span := res.workEnd.Sub(res.t0); span > 0 {
		res.workRate = float64(s.in(res.t0, res.workEnd)) / span.Seconds()
	}
	res.slideMost, _, res.slideOK = s.sliding(res.t0, res.measureEnd, slice, slidingStep)
	_, res.slideFewer, res.slideWorkOK = s.sliding(res.t0, res.workEnd, slice, slidingStep)
	for w, ts := range by {
		res.members = append(res.members, w)
		res.perMember[w] = sortedStarts(ts).slices(res.t0, res.measureEnd, slice)
	}
	slices.SortFunc(res.members, compareStrings)
	res.leftAfter = len(ids) - doneBefore(execs, res.measureEnd)
	res.drained, res.acc = f.waitDrained(ctx, ids, 15*time.Minute)
	return res, ctx.Err()
}

// allDoneAt is when the last of ids got its first done answer (its start), and whether all did.
func allDoneAt(execs []downstream.Execution, ids []string) (time.Time, bool) {
	first := map[string]time.Time{}
	for _, x := range execs {
		if t, seen := first[x.TransactionID]; x.Done() && (!seen || x.Start.Before(t)) {
			first[x.TransactionID] = x.Start
		}
	}
	var last time.Time
	for _, id := range ids {
		t, ok := first[id]
		if !ok {
			return time.Time{}, false
		}
		if t.After(last) {
			last = t
		}
	}
	return last, true
}

// doneBefore counts the transactions with a done answer that began before t.
func doneBefore(execs []downstream.Execution, t time.Time) int {
	done := map[string]bool{}
	for _, x := range execs {
		if x.Done() && x.Start.Before(t) {
			done[x.TransactionID] = true
		}
	}
	return len(done)
}

// maxMin is the largest of xs, and the smallest of its first n.
func maxMin(xs []int, n int) (most, fewest int, ok bool) {
	if len(xs) == 0 {
		return 0, 0, false
	}
	most = slices.Max(xs)
	if n == 0 {
		return most, 0, false
	}
	return most, slices.Min(xs[:n]), true
}

func printRate(w io.Writer, limit float64, measure time.Duration, rs []rateResult) {
	fmt.Fprintf(w, "\n### Rate limit: executions per 1-minute slice vs the limit (%v/s = %d a minute)\n\n", limit, int(limit*60))
	fmt.Fprintln(w, "| run | pending rows | mean rate while work | whole minutes (with work) | executions per minute | max % of limit, any slice (goal ≤ 110) | min % while work (goal ≥ 80) | sliding minutes: max % / min % while work | left at the end | drained after | lost | executed twice |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|")
	for _, r := range rs {
		most, fewest, ok := maxMin(r.ring, r.withWork)
		minCell := "—"
		if ok {
			minCell = fmt.Sprintf("%.0f", percent(fewest, slice, r.limit))
		}
		slide := "—"
		if r.slideOK {
			slide = fmt.Sprintf("%.0f / ", percent(r.slideMost, slice, r.limit))
			if r.slideWorkOK {
				slide += fmt.Sprintf("%.0f", percent(r.slideFewer, slice, r.limit))
			} else {
				slide += "—"
			}
		}
		maxCell := "—"
		if len(r.ring) > 0 {
			maxCell = fmt.Sprintf("%.0f", percent(most, slice, r.limit))
		}
		fmt.Fprintf(w, "| %s | %d | %.1f/s (%.0f %%) | %d (%d) | %s | %s | %s | %s | %d | %v | %d | %d |\n",
			r.run.name(), r.run.layout.total(), r.workRate, 100*r.workRate/r.limit, len(r.ring), r.withWork, ints(r.ring), maxCell, minCell, slide,
			r.leftAfter, r.drained.Round(time.Second), r.acc.lost(), r.acc.twice)
	}
	fmt.Fprintf(w, "\nRaw values (slices of %v from each run's first execution; measured %v; sliding minutes start every %v):\n\n", slice, measure, slidingStep)
	for _, r := range rs {
		fmt.Fprintf(w, "- %s: layout %v; t0 %s; work until %s (%.1f s after t0); %d executions in the measured span; per slice %v",
			r.run.name(), r.run.layout, r.t0.UTC().Format("15:04:05.000"), r.workEnd.UTC().Format("15:04:05.000"),
			r.workEnd.Sub(r.t0).Seconds(), r.inMeasure, r.ring)
		for _, m := range r.members {
			fmt.Fprintf(w, "; %s %v", m, r.perMember[m])
		}
		fmt.Fprintf(w, "; sliding max %d min-while-work %d; %d calls in all, %d rows done of %d, %d contract violations\n",
			r.slideMost, r.slideFewer, r.acc.calls, r.acc.done, r.acc.rows, r.acc.violations)
	}
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
