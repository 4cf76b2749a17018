package main

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/retryring/retryring/worker"
)

// timeline is a no-op executor that keeps when each execution began and for which transaction,
// so that a run can say how long executions stopped and how many ran twice.
type timeline struct {
	mu    sync.Mutex
	execs []execution
}

type execution struct {
	at time.Time
	tx string
}

// Execute implements worker.Executor.
func (tl *timeline) Execute(_ context.Context, t worker.Task) worker.Outcome {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.execs = append(tl.execs, execution{at: time.Now(), tx: t.TransactionID})
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

// snapshot returns the executions so far, in the order they began.
func (tl *timeline) snapshot() []execution {
	tl.mu.Lock()
	out := append([]execution(nil), tl.execs...)
	tl.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// distinct is the number of transactions executed at least once.
func (tl *timeline) distinct() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	seen := make(map[string]bool, len(tl.execs))
	for _, e := range tl.execs {
		seen[e.tx] = true
	}
	return len(seen)
}

// twice is the number of transactions executed more than once.
func twice(es []execution) int {
	n := map[string]int{}
	dup := 0
	for _, e := range es {
		n[e.tx]++
		if n[e.tx] == 2 {
			dup++
		}
	}
	return dup
}

// longestGap is the longest time between two consecutive starts of executions (sorted by time)
// and the start it followed; zero with fewer than two executions.
func longestGap(es []execution) (time.Duration, time.Time) {
	var gap time.Duration
	var after time.Time
	for i := 1; i < len(es); i++ {
		if d := es[i].at.Sub(es[i-1].at); d > gap {
			gap, after = d, es[i-1].at
		}
	}
	return gap, after
}

// rate is the executions per second that began in [from, from+d); 0 for an empty span.
func rate(es []execution, from time.Time, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	to := from.Add(d)
	n := 0
	for _, e := range es {
		if !e.at.Before(from) && e.at.Before(to) {
			n++
		}
	}
	return float64(n) / d.Seconds()
}
