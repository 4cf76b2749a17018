package worker

import (
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// rescans tells which instance visits are re-scans: visits of an instance whose token this process
// had not covered in that window before. When a range changes owner (a handover), or a worker
// starts again, the new owner lists and visits every pending instance of the range in every
// readable window, work its previous owner may have begun; what a membership change costs the data
// plane is that count, beside the share of the ring it moved.
//
// Per window it keeps the ranges this process listed instances for at its last visit. A window it
// has not visited yet (a new one, in the normal course) is compared with the ranges of the last
// visit of the cycle before, or, after a cycle that found no window, with the ranges it held at
// that cycle's end: a window that appears later under the same ranges is not a re-scan, while
// ranges gained since are. Until a cycle of this process ended holding a lease or having visited
// a window, every visit is one (after its start). It is touched only by the goroutine running the
// cycle.
type rescans struct {
	started bool                           // a cycle of this process ended holding a lease or having visited a window
	last    lease.Ranges                   // ranges of the last visit of the cycle before
	current lease.Ranges                   // ranges of the last visit of the cycle under way
	covered map[window.Window]lease.Ranges // ranges of each window's last visit
	visited map[window.Window]bool         // windows visited in the cycle under way
}

// window starts the visit of w under ranges: it returns the ranges whose instances count as
// re-scanned, and whether they are the process's first visits ("start") rather than a handover's.
func (r *rescans) window(w window.Window, ranges lease.Ranges) (gained lease.Ranges, start bool) {
	if r.covered == nil {
		r.covered, r.visited = map[window.Window]lease.Ranges{}, map[window.Window]bool{}
	}
	before, ok := r.covered[w]
	if !ok {
		before = r.last
	}
	r.current, r.covered[w], r.visited[w] = ranges, ranges, true
	return ranges.Subtract(before), !r.started
}

// cycleEnded forgets the windows the cycle did not visit (deleted, or no longer listed); held are
// the ranges of the lease held at the cycle's end, if ok.
func (r *rescans) cycleEnded(held lease.Ranges, ok bool) {
	switch {
	case len(r.visited) > 0:
		r.started, r.last = true, r.current
	case ok:
		r.started, r.last = true, held
	}
	for w := range r.covered {
		if !r.visited[w] {
			delete(r.covered, w)
		}
	}
	clear(r.visited)
}

// endRescans ends the re-scan count's cycle with the lease held now.
func (s *Scanner) endRescans() {
	held, ok := s.guard.Current()
	s.rescans.cycleEnded(held.Ranges, ok)
}
