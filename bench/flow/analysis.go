package main

import (
	"slices"
	"time"
)

// starts are the instants at which executions reached the downstream, sorted.
type starts []time.Time

func sortedStarts(ts []time.Time) starts {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// in counts the starts in [from, to).
func (s starts) in(from, to time.Time) int {
	lo, _ := slices.BinarySearchFunc(s, from, func(e, t time.Time) int { return e.Compare(t) })
	hi, _ := slices.BinarySearchFunc(s, to, func(e, t time.Time) int { return e.Compare(t) })
	return hi - lo
}

// slices counts the starts in each whole slice [t0+k·d, t0+(k+1)·d) that ends by end. A slice
// cut off by end is left out: its rate would be that of a shorter span.
func (s starts) slices(t0, end time.Time, d time.Duration) []int {
	var out []int
	for from := t0; !from.Add(d).After(end); from = from.Add(d) {
		out = append(out, s.in(from, from.Add(d)))
	}
	return out
}

// sliding is the most and the fewest starts in any window [t, t+d) with t0 ≤ t and t+d ≤ end,
// t stepping by step from t0; ok is false when no window fits. Between two steps the count can
// differ from a step's by the starts of one step's span, at the rates measured here a few.
func (s starts) sliding(t0, end time.Time, d, step time.Duration) (most, fewest int, ok bool) {
	for from := t0; !from.Add(d).After(end); from = from.Add(step) {
		n := s.in(from, from.Add(d))
		if !ok || n > most {
			most = n
		}
		if !ok || n < fewest {
			fewest = n
		}
		ok = true
	}
	return most, fewest, ok
}

// last is the latest start before t, and whether there is one.
func (s starts) last(before time.Time) (time.Time, bool) {
	i, _ := slices.BinarySearchFunc(s, before, func(e, t time.Time) int { return e.Compare(t) })
	if i == 0 {
		return time.Time{}, false
	}
	return s[i-1], true
}

// percent is n executions over d as a percentage of limit per second.
func percent(n int, d time.Duration, limit float64) float64 {
	return 100 * float64(n) / d.Seconds() / limit
}
