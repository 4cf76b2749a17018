package main

import (
	"math"
	"sort"
	"time"

	"github.com/retryring/retryring/bench/leaseprobe/event"
	"github.com/retryring/retryring/lease"
)

// leaseRec is one installed lease element of one probe: usable from at (its install) until expires
// (the guard's end, counted from the demand), unless a later element replaced it first.
type leaseRec struct {
	at, expires int64 // wall-clock Unix ns
	epoch       uint64
	ranges      lease.Ranges
	addr        string // coordinator the element came from
}

// leaseRecs turns a probe's Lease events of one incarnation into records, in install order.
func leaseRecs(evs []event.Event, incarnation string) []leaseRec {
	var out []leaseRec
	for _, e := range evs {
		if e.Kind != event.Lease || e.Incarnation != incarnation {
			continue
		}
		rs, err := e.LeaseRanges()
		if err != nil {
			continue // the lease client refuses such an element before OnLease; never seen
		}
		out = append(out, leaseRec{at: e.AtNs, expires: e.ExpiresAtNs, epoch: e.Epoch, ranges: rs, addr: e.CoordinatorAddr})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// validAt returns the lease the guard held at t, if it was still usable then: the latest element
// installed at or before t (an install replaces the previous lease at once), if t is before its end.
func validAt(recs []leaseRec, t int64) (leaseRec, bool) {
	i := sort.Search(len(recs), func(i int) bool { return recs[i].at > t }) - 1
	if i < 0 || t >= recs[i].expires {
		return leaseRec{}, false
	}
	return recs[i], true
}

// unionAt is every token some probe of h could use at t.
func unionAt(h map[string][]leaseRec, t int64) lease.Ranges {
	var u lease.Ranges
	for _, recs := range h {
		if r, ok := validAt(recs, t); ok {
			u = u.Union(r.ranges)
		}
	}
	return u
}

// firstCovered is the first instant in [from, until] at which the probes of h, together, could use
// every token of want. Coverage only grows at an install, so the candidates are from and every
// install after it.
func firstCovered(h map[string][]leaseRec, from, until int64, want lease.Ranges) (int64, bool) {
	cands := []int64{from}
	for _, recs := range h {
		for _, r := range recs {
			if r.at > from && r.at <= until {
				cands = append(cands, r.at)
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i] < cands[j] })
	for _, t := range cands {
		if want.Subtract(unionAt(h, t)).Empty() {
			return t, true
		}
	}
	return 0, false
}

// firstGap is the first instant in [from, to] at which the probe had no usable lease at all (its
// guard refused everything), if any. Validity ends only at an element's expiry with no newer
// element installed by then.
func firstGap(recs []leaseRec, from, to int64) (int64, bool) {
	if _, ok := validAt(recs, from); !ok {
		return from, true
	}
	for i, r := range recs {
		if r.expires < from || r.expires > to {
			continue
		}
		if i+1 == len(recs) || recs[i+1].at > r.expires {
			return r.expires, true
		}
	}
	return 0, false
}

// summary is the distribution of one figure over its trials.
type summary struct {
	N        int // trials measured
	Timeouts int // trials that did not reach the end point within the bound
	Median   time.Duration
	P99      time.Duration // nearest rank: with fewer than 100 trials it is the maximum
	Min, Max time.Duration
}

func summarize(ds []time.Duration, timeouts int) summary {
	s := summary{N: len(ds), Timeouts: timeouts}
	if len(ds) == 0 {
		return s
	}
	v := append([]time.Duration(nil), ds...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	n := len(v)
	s.Median = (v[(n-1)/2] + v[n/2]) / 2
	s.P99 = v[int(math.Ceil(0.99*float64(n)))-1]
	s.Min, s.Max = v[0], v[n-1]
	return s
}
