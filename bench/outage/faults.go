package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/internal/downstream"
)

// fault is one fault the bench injected (or saw: a worker that exited by itself), with the
// instants it began and ended on this process's clock. A repeated attempt is explained by the
// fault its first call's settling ran into, so the report places every repeat against these.
type fault struct {
	kind       string // "sigstop", "leader kill", "worker exit"
	who        string // the process
	start, end time.Time
}

func (f fault) String() string {
	return fmt.Sprintf("%s %s", f.kind, f.who)
}

// faultLog gathers the faults of one run; safe for concurrent use (a watcher adds worker exits).
type faultLog struct {
	mu     sync.Mutex
	faults []fault
}

func (l *faultLog) add(f fault) {
	l.mu.Lock()
	l.faults = append(l.faults, f)
	l.mu.Unlock()
}

func (l *faultLog) all() []fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]fault(nil), l.faults...)
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// nearest is the fault closest to t (zero distance when t lies within it) and how far t lies
// after its end (positive) or before its start (negative); ok is false when there are no faults.
func nearest(faults []fault, t time.Time) (f fault, offset time.Duration, ok bool) {
	best := time.Duration(-1)
	for _, c := range faults {
		var off, dist time.Duration
		switch {
		case t.Before(c.start):
			off = t.Sub(c.start)
			dist = -off
		case t.After(c.end):
			off = t.Sub(c.end)
			dist = off
		}
		if best < 0 || dist < best {
			f, offset, best, ok = c, off, dist, true
		}
	}
	return f, offset, ok
}

// attribution names the fault a repeat falls in: the one nearest the end of its first call,
// whose settling (the copy and the floor) the second call shows was lost. Within is how far
// after a fault's end that still counts: its lease consequences (a worker marked departed, its
// ranges handed on a TTL later) outlast the fault itself.
func attribution(faults []fault, r downstream.Retry, within time.Duration) string {
	f, off, ok := nearest(faults, r.Prev.End)
	switch {
	case !ok:
		return "no fault in this run"
	case off == 0:
		return "during " + f.String()
	case off > 0 && off <= within:
		return fmt.Sprintf("%v after %s", off.Round(time.Millisecond), f)
	case off < 0 && -off <= within:
		return fmt.Sprintf("%v before %s", (-off).Round(time.Millisecond), f)
	default:
		return "outside every fault"
	}
}

// describeCall is one call as the report prints it: worker, lease epoch, window, attempt, its
// interval in seconds since start and the answer.
func describeCall(e downstream.Execution, start time.Time) string {
	end := "running"
	if !e.End.IsZero() {
		end = fmt.Sprintf("%.3f", e.End.Sub(start).Seconds())
	}
	return fmt.Sprintf("%s epoch %d window %s/%d attempt %d [%.3f..%s s] %d",
		e.WorkerID, e.LeaseEpoch, e.WindowDate, e.WindowMinute, e.Attempt, e.Start.Sub(start).Seconds(), end, e.Status)
}

// repeatReport says, for every repeated attempt, both calls and the fault it falls in, then the
// count per fault; start is the outage's start, what every time is counted from.
func repeatReport(name string, repeats []downstream.Retry, faults []fault, start time.Time, within time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s faults (s since the outage began):\n", name)
	for _, f := range faults {
		fmt.Fprintf(&b, "  %-12s %-4s %.3f..%.3f\n", f.kind, f.who, f.start.Sub(start).Seconds(), f.end.Sub(start).Seconds())
	}
	byFault := map[string]int{}
	for _, r := range repeats {
		a := attribution(faults, r, within)
		key := a
		if i := strings.Index(a, " after "); i >= 0 {
			key = "after " + a[i+len(" after "):]
		} else if i := strings.Index(a, " before "); i >= 0 {
			key = "before " + a[i+len(" before "):]
		}
		byFault[key]++
		fmt.Fprintf(&b, "  repeat %s: first %s; again %s; %s\n", r.Key,
			describeCall(r.Prev, start), describeCall(r.Exec, start), a)
	}
	keys := make([]string, 0, len(byFault))
	for k := range byFault {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, byFault[k])
	}
	fmt.Fprintf(&b, "%s repeated attempts by fault: %d in all", name, len(repeats))
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, "; "))
	}
	return b.String()
}
