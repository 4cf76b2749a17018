package downstream

import (
	"fmt"
	"sort"
	"time"
)

// What invariant 9 (backoff holds) looks like from the downstream's side, computed from the record
// alone: a step is called once per attempt, and each attempt no earlier than its backoff allows.

// Retry is one call of a step judged against the call before it.
type Retry struct {
	Key  string    // the idempotency key: the step
	Prev Execution // the earlier call it is judged against
	Exec Execution // this call
}

func (r Retry) String() string {
	return fmt.Sprintf("%s: attempt %d at %s after attempt %d answered %d at %s", r.Key,
		r.Exec.Attempt, r.Exec.Start.Format("15:04:05.000"), r.Prev.Attempt, r.Prev.Status, r.Prev.End.Format("15:04:05.000"))
}

// transientStatus reports whether the executor takes a status for a passing failure (its built-in
// rules: 5xx, 408, 425, 429, or no answer at all).
func transientStatus(status int) bool {
	switch status {
	case 408, 425, 429:
		return true
	}
	return status >= 500 || status == 0
}

// bySteps groups execs by idempotency key, each in arrival order.
func bySteps(execs []Execution) map[string][]Execution {
	out := map[string][]Execution{}
	for _, e := range execs {
		out[e.Key()] = append(out[e.Key()], e)
	}
	for _, es := range out {
		sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	}
	return out
}

// RepeatedAttempts returns the calls that repeat an attempt of their step already answered
// transient: the load a kept bucket put on a service that is down (goal 0; the one exception
// invariant 9 allows is a crash between a copy and its floor). Sorted by arrival.
func RepeatedAttempts(execs []Execution) []Retry {
	var out []Retry
	for key, es := range bySteps(execs) {
		answered := map[int]Execution{} // attempt -> its transient answer
		for _, e := range es {
			if prev, ok := answered[e.Attempt]; ok {
				out = append(out, Retry{Key: key, Prev: prev, Exec: e})
			}
			if !e.Running() && transientStatus(e.Status) && !e.Aborted() {
				answered[e.Attempt] = e
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Exec.Seq < out[j].Exec.Seq })
	return out
}

// EarlyCalls returns the calls made before the window their backoff chose could open: after a
// transient answer to attempt a, the worker records the step into the window that holds
// answer + d × (1/2 + u/2), d = min(L × 2^a, maxDelay) (or a later one: a Retry-After only pushes
// later), and that window opens at its start at the earliest. So attempt a+1 must not arrive
// before the start of the window holding answer + d/2. Sorted by arrival.
func EarlyCalls(execs []Execution, windowMinutes int, maxDelay time.Duration) []Retry {
	var out []Retry
	length := time.Duration(windowMinutes) * time.Minute
	for key, es := range bySteps(execs) {
		last := map[int]Execution{} // attempt -> its latest transient answer
		for _, e := range es {
			if prev, ok := last[e.Attempt-1]; ok && length > 0 &&
				e.Start.Before(prev.End.Add(minBackoff(windowMinutes, prev.Attempt, maxDelay)).Truncate(length)) {
				out = append(out, Retry{Key: key, Prev: prev, Exec: e})
			}
			if !e.Running() && transientStatus(e.Status) && !e.Aborted() {
				last[e.Attempt] = e
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Exec.Seq < out[j].Exec.Seq })
	return out
}

// minBackoff is the least delay the executor contract allows after a transient answer to an
// attempt: half of min(L × 2^attempt, maxDelay). It is written from product.md's executor
// contract, not taken from worker/retrypolicy, on purpose: a check that shares the code it checks
// would share its bugs.
func minBackoff(windowMinutes, attempt int, maxDelay time.Duration) time.Duration {
	d := time.Duration(windowMinutes) * time.Minute
	for i := 0; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay) / 2
}

// CallsPerStep is the largest number of calls any one step received, and that step's key.
func CallsPerStep(execs []Execution) (most int, key string) {
	for k, es := range bySteps(execs) {
		if len(es) > most || len(es) == most && k < key {
			most, key = len(es), k
		}
	}
	return most, key
}
