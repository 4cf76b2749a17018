package ringtest

import (
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// UsableAt is the union of the ranges usable at instant t by the holders whose intervals keep
// accepts (nil keeps all).
func UsableAt(ivs []Interval, t time.Duration, keep func(Interval) bool) lease.Ranges {
	var out lease.Ranges
	for _, iv := range ivs {
		if iv.From <= t && t < iv.To && (keep == nil || keep(iv)) {
			out = out.Union(iv.Ranges)
		}
	}
	return out
}

// OfHolder keeps the intervals of one holder (a worker id and incarnation).
func OfHolder(worker, incarnation string) func(Interval) bool {
	h := holderName(worker, incarnation)
	return func(iv Interval) bool { return iv.Holder() == h }
}

// ExceptHolder keeps the intervals of every holder but one.
func ExceptHolder(worker, incarnation string) func(Interval) bool {
	h := holderName(worker, incarnation)
	return func(iv Interval) bool { return iv.Holder() != h }
}

// CheckKept reports the instants in [from, to) at which the holder could not use every token it
// could use at from: what invariant 4 forbids across a leader change shorter than the lease. Node-0
// is kept too: a holder that was Node-0 at from must stay Node-0 throughout.
func CheckKept(ivs []Interval, worker, incarnation string, from, to time.Duration) []Violation {
	mine := filter(ivs, OfHolder(worker, incarnation))
	base := UsableAt(mine, from, nil)
	node0 := node0At(mine, from)
	var out []Violation
	var lastMissing lease.Ranges
	lostNode0 := false
	for _, p := range changePoints(mine, from, to) {
		missing := base.Subtract(UsableAt(mine, p, nil))
		if !missing.Empty() && !missing.Equal(lastMissing) {
			out = append(out, Violation{Kind: Gap, At: p, Ranges: missing, Holders: []string{holderName(worker, incarnation)}})
		}
		lastMissing = missing
		if node0 && !node0At(mine, p) && !lostNode0 {
			out = append(out, Violation{Kind: Gap, At: p, Holders: []string{holderName(worker, incarnation)}})
			lostNode0 = true
		}
	}
	return out
}

// FirstCovered returns the earliest instant at or after after at which the holders that keep accepts
// could use every token of target, and false if that never happened in the history.
func FirstCovered(ivs []Interval, target lease.Ranges, after time.Duration, keep func(Interval) bool) (time.Duration, bool) {
	points := []time.Duration{after}
	for _, iv := range ivs {
		if iv.From > after && (keep == nil || keep(iv)) {
			points = append(points, iv.From)
		}
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	for _, p := range points {
		if target.Subtract(UsableAt(ivs, p, keep)).Empty() {
			return p, true
		}
	}
	return 0, false
}

func node0At(ivs []Interval, t time.Duration) bool {
	for _, iv := range ivs {
		if iv.Node0 && iv.From <= t && t < iv.To {
			return true
		}
	}
	return false
}

func filter(ivs []Interval, keep func(Interval) bool) []Interval {
	var out []Interval
	for _, iv := range ivs {
		if keep(iv) {
			out = append(out, iv)
		}
	}
	return out
}

// changePoints lists from and every interval endpoint inside (from, to), sorted and distinct: the
// instants at which what is usable can change.
func changePoints(ivs []Interval, from, to time.Duration) []time.Duration {
	if to <= from {
		return nil
	}
	points := []time.Duration{from}
	for _, iv := range ivs {
		for _, p := range []time.Duration{iv.From, iv.To} {
			if p > from && p < to {
				points = append(points, p)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	out := points[:1]
	for _, p := range points[1:] {
		if p != out[len(out)-1] {
			out = append(out, p)
		}
	}
	return out
}
