package admin

import (
	"fmt"

	"github.com/retryring/retryring/lease"
)

// AtRest says whether the ring is at rest with exactly the workers given (worker id → the
// incarnation it runs, "" for any): each of them is an active member and nobody else is listed
// (no joining member, no departed incarnation still holding what it held); their ranges cover the
// whole ring with no overlap; their node indexes are distinct, within the member count, and one
// of them is Node-0. Nil when all of that holds, else the first thing that does not, for a person
// to read.
//
// It reads the view alone: whether the workers' own leases agree with it (the epoch and ranges
// they hold) is the caller's to check, since only the caller can ask them. This is the one
// judgement of "settled" that the demo, the process launcher, the test kit and the benchmarks
// share.
func (r RingStateView) AtRest(workers map[string]string) error {
	var covered lease.Ranges
	seen := make(map[string]bool, len(r.Members))
	byIndex := make(map[int]string, len(r.Members))
	for _, m := range r.Members {
		inc, want := workers[m.WorkerID]
		switch {
		case !want:
			return fmt.Errorf("%s is %s, and not one of the %d workers", m.named(), m.State, len(workers))
		case m.State != MemberActive:
			return fmt.Errorf("%s is %s", m.named(), m.State)
		case seen[m.WorkerID]:
			return fmt.Errorf("%s is a member twice", m.WorkerID)
		case inc != "" && inc != m.Incarnation:
			return fmt.Errorf("%s is a member in incarnation %.8s, not the running %.8s", m.WorkerID, m.Incarnation, inc)
		}
		seen[m.WorkerID] = true
		if other, dup := byIndex[m.NodeIndex]; dup || m.NodeIndex < 0 || m.NodeIndex >= len(r.Members) {
			if dup {
				return fmt.Errorf("%s and %s are both node %d", other, m.WorkerID, m.NodeIndex)
			}
			return fmt.Errorf("%s is node %d of %d members", m.WorkerID, m.NodeIndex, len(r.Members))
		}
		byIndex[m.NodeIndex] = m.WorkerID
		rs, err := lease.DecodeRanges(m.Ranges)
		if err != nil {
			return fmt.Errorf("%s: %w", m.WorkerID, err)
		}
		if covered.Overlaps(rs) {
			return fmt.Errorf("%s holds %v, which overlaps another member's", m.WorkerID, rs)
		}
		covered = covered.Union(rs)
	}
	if len(seen) != len(workers) {
		return fmt.Errorf("%d of %d workers are members", len(seen), len(workers))
	}
	if len(workers) == 0 {
		return nil
	}
	if !covered.Equal(lease.Ranges{lease.FullRing}) {
		return fmt.Errorf("the members hold %v, not the whole ring", covered)
	}
	return nil
}

// named is the member's worker id, with the start of its incarnation when the view has one.
func (m MemberView) named() string {
	if m.Incarnation == "" {
		return m.WorkerID
	}
	return fmt.Sprintf("%s (incarnation %.8s)", m.WorkerID, m.Incarnation)
}
