package swarm

import (
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// FaultReport is what a fault (a coordinator killed or restarted at At) cost the swarm, from At
// until End. Every figure is read from what the members' guards held, on the process clock.
type FaultReport struct {
	At, End time.Time
	// Members is the swarm's size; Held how many held a usable lease at At.
	Members, Held int
	// Lapsed counts members that had no usable lease at some instant of [At, End); LongestLapse is
	// the longest such span. A member that held nothing at At but got a lease later counts too.
	Lapsed       int
	LongestLapse time.Duration
	// RanOut counts members whose lease ended before their first element from a coordinator other
	// than the faulted one (or who got no such element by End): the issue's "leases that ran out
	// before the new leader's first element".
	RanOut int
	// Renewed holds, for each member that got an element from another coordinator than the faulted
	// one after At, how long after At the first one came, sorted; NotRenewed counts the others.
	Renewed    []time.Duration
	NotRenewed int
	// NewAssignment counts members whose epoch at End differs from the one they held at At: the
	// fault changed their assignment. RingsChanged counts rings in which some member saw a
	// generation other than the ring's generation at At (a membership change was committed).
	NewAssignment int
	RingsChanged  int
	// Overlaps found anywhere in [At, End) (and before: the check runs on the whole history to End).
	Overlaps []Overlap
}

// Fault analyses [at, end) of h for a fault of the coordinator whose RSocket address is faulted
// ("" when none in particular: then every element after at counts as a renewal).
func (h History) Fault(at, end time.Time, faulted string) FaultReport {
	r := FaultReport{At: at, End: end, Members: len(h.Members)}
	genAt := map[lease.RingKey]uint64{}
	changed := map[lease.RingKey]bool{}
	for i, m := range h.Members {
		before, held := m.lastBefore(at)
		if held && before.End.After(at) && !before.Ranges.Empty() {
			r.Held++
		}
		if held && before.Generation > genAt[m.Ring] {
			genAt[m.Ring] = before.Generation
		}
		lapses := h.Lapses(i, at, end)
		if len(lapses) > 0 {
			r.Lapsed++
		}
		for _, l := range lapses {
			r.LongestLapse = max(r.LongestLapse, l.Length())
		}
		first, renewed := m.firstFromOther(at, end, faulted)
		if renewed {
			r.Renewed = append(r.Renewed, first.At.Sub(at))
		} else {
			r.NotRenewed++
		}
		// A lapse before the first element of another coordinator: the lease held at the fault
		// (and whatever the faulted node still sent, as a node handing leadership over on SIGTERM
		// may) did not reach it.
		if !renewed || lapsedBefore(lapses, first.At) {
			r.RanOut++
		}
		if after, ok := m.lastBefore(end); ok && held && after.Epoch != before.Epoch {
			r.NewAssignment++
		}
	}
	for _, m := range h.Members {
		for _, in := range m.Installs {
			if in.At.After(at) && in.At.Before(end) && genAt[m.Ring] != 0 && in.Generation != genAt[m.Ring] {
				changed[m.Ring] = true
			}
		}
	}
	r.RingsChanged = len(changed)
	sort.Slice(r.Renewed, func(a, b int) bool { return r.Renewed[a] < r.Renewed[b] })
	r.Overlaps = h.Overlaps(end)
	return r
}

// lapsedBefore reports whether one of lapses began before t.
func lapsedBefore(lapses []Lapse, t time.Time) bool {
	for _, l := range lapses {
		if l.From.Before(t) {
			return true
		}
	}
	return false
}

// firstFromOther is m's first install in (at, end) from a coordinator other than faulted.
func (m MemberHistory) firstFromOther(at, end time.Time, faulted string) (Install, bool) {
	for _, in := range m.Installs {
		if in.At.After(at) && in.At.Before(end) && (faulted == "" || in.Coordinator != faulted) {
			return in, true
		}
	}
	return Install{}, false
}
