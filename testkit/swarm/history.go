package swarm

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// Install is one lease element as one member's guard installed it. Every instant is a reading of
// the one process clock (time.Now, monotonic) that all members of a swarm share, so instants of
// different members compare directly.
type Install struct {
	// At is when the guard installed the element.
	At time.Time
	// End is the lease end: the demand's send time plus ttl_ms, on the member's own clock. The
	// guard stops the ranges there unless a newer element arrived first.
	End         time.Time
	ValidFrom   time.Time
	Epoch       uint64
	Generation  uint64
	NodeIndex   int
	NodeCount   int
	Ranges      lease.Ranges
	Coordinator string // RSocket address of the connection the element came on
}

// MemberHistory is everything one member installed, oldest first.
type MemberHistory struct {
	ID          string
	Incarnation string
	Ring        lease.RingKey
	// Stopped is when the member stopped on purpose (zero while it runs): no lease is owed after it.
	Stopped  time.Time
	Installs []Install
}

// History is a swarm's record. It is a copy: analysing it takes no lock.
type History struct {
	Members []MemberHistory
}

// Interval is a span [From, To) during which a member's guard would let it use Ranges.
type Interval struct {
	Member   int // index in History.Members
	From, To time.Time
	Epoch    uint64
	Node0    bool
	Ranges   lease.Ranges
}

// Intervals are the spans during which m's guard held a usable lease, up to until, renewals of one
// assignment merged into one span. The element installed at At_k is usable from At_k until the
// earliest of its End, the next install (whose ranges take over), m.Stopped and until; an element
// with no range, or that arrived already expired, is not usable at all.
func (m MemberHistory) Intervals(until time.Time) []Interval {
	if !m.Stopped.IsZero() && m.Stopped.Before(until) {
		until = m.Stopped
	}
	var out []Interval
	for k, in := range m.Installs {
		to := in.End
		if k+1 < len(m.Installs) && m.Installs[k+1].At.Before(to) {
			to = m.Installs[k+1].At
		}
		if until.Before(to) {
			to = until
		}
		if !in.At.Before(to) || in.Ranges.Empty() {
			continue
		}
		iv := Interval{From: in.At, To: to, Epoch: in.Epoch, Node0: in.NodeIndex == 0, Ranges: in.Ranges}
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.To.Equal(iv.From) && last.Epoch == iv.Epoch && last.Node0 == iv.Node0 && last.Ranges.Equal(iv.Ranges) {
				last.To = iv.To
				continue
			}
		}
		out = append(out, iv)
	}
	return out
}

// Lapse is a span during which a member that was supposed to hold a lease held none.
type Lapse struct {
	Member   int
	From, To time.Time
}

// Length is the lapse's duration.
func (l Lapse) Length() time.Duration { return l.To.Sub(l.From) }

// Lapses are the spans of [from, to) during which member i held no usable lease although it was
// supposed to: from its first install on, until it stopped. A member that never installed
// anything owes nothing here (Fault counts it as not renewed).
func (h History) Lapses(i int, from, to time.Time) []Lapse {
	m := h.Members[i]
	if len(m.Installs) == 0 {
		return nil
	}
	if first := m.Installs[0].At; from.Before(first) {
		from = first
	}
	if !m.Stopped.IsZero() && m.Stopped.Before(to) {
		to = m.Stopped
	}
	var out []Lapse
	cursor := from
	for _, iv := range m.Intervals(to) {
		if !iv.To.After(cursor) {
			continue
		}
		if iv.From.After(cursor) {
			out = append(out, Lapse{Member: i, From: cursor, To: iv.From})
		}
		cursor = iv.To
	}
	if cursor.Before(to) {
		out = append(out, Lapse{Member: i, From: cursor, To: to})
	}
	return out
}

// Overlap is two members of one ring whose guards would both have let them use a token (or both
// be Node-0) at one instant: a violation of exclusivity (invariant 2) or of Node-0 uniqueness.
type Overlap struct {
	Ring   lease.RingKey
	A, B   int // member indexes
	At     time.Time
	Ranges lease.Ranges // the tokens both held (empty if only Node-0 was shared)
	Node0  bool
}

// String renders the overlap for a failure message or a report.
func (o Overlap) String() string {
	return fmt.Sprintf("ring %s: members %d and %d at %s share %v (node0 %t)", o.Ring, o.A, o.B,
		o.At.Format("15:04:05.000000"), o.Ranges, o.Node0)
}

// Overlaps checks every ring for two members usable on one token at one instant, up to until. It
// sweeps each ring's intervals in order of their start: two half-open intervals meet exactly when
// the later one starts before the earlier one ends.
func (h History) Overlaps(until time.Time) []Overlap {
	byRing := map[lease.RingKey][]Interval{}
	for i, m := range h.Members {
		for _, iv := range m.Intervals(until) {
			iv.Member = i
			byRing[m.Ring] = append(byRing[m.Ring], iv)
		}
	}
	var out []Overlap
	for ring, ivs := range byRing {
		sort.Slice(ivs, func(a, b int) bool { return ivs[a].From.Before(ivs[b].From) })
		var live []Interval
		for _, b := range ivs {
			kept := live[:0]
			for _, a := range live {
				if a.To.After(b.From) {
					kept = append(kept, a)
				}
			}
			live = kept
			for _, a := range live {
				if a.Member == b.Member {
					continue
				}
				shared := a.Ranges.Intersect(b.Ranges)
				if !shared.Empty() || (a.Node0 && b.Node0) {
					out = append(out, Overlap{Ring: ring, A: a.Member, B: b.Member, At: b.From, Ranges: shared, Node0: a.Node0 && b.Node0})
				}
			}
			live = append(live, b)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].At.Before(out[b].At) })
	return out
}

// Ages are how long each demand waited for its element (At − ValidFrom), for the elements
// installed in [from, to): the lease age at receipt. At steady state it is about one renewal,
// since the coordinator answers a demand at the next renewal.
func (h History) Ages(from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, m := range h.Members {
		for _, in := range m.Installs {
			if !in.At.Before(from) && in.At.Before(to) {
				out = append(out, in.At.Sub(in.ValidFrom))
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// Elements counts the elements installed in [from, to) and how many of them came from each
// coordinator address.
func (h History) Elements(from, to time.Time) (total int, byCoordinator map[string]int) {
	byCoordinator = map[string]int{}
	for _, m := range h.Members {
		for _, in := range m.Installs {
			if !in.At.Before(from) && in.At.Before(to) {
				total++
				byCoordinator[in.Coordinator]++
			}
		}
	}
	return total, byCoordinator
}

// lastBefore is the last install of m at or before t.
func (m MemberHistory) lastBefore(t time.Time) (Install, bool) {
	i := sort.Search(len(m.Installs), func(k int) bool { return m.Installs[k].At.After(t) })
	if i == 0 {
		return Install{}, false
	}
	return m.Installs[i-1], true
}

// Percentile is the p-th percentile (0 ≤ p ≤ 1, nearest rank) of sorted durations; 0 when empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(len(sorted)-1, i))
	return sorted[i]
}
