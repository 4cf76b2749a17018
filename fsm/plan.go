package fsm

import "github.com/retryring/retryring/lease"

// Plan computes the next assignments of a ring from its committed state, or nil when nothing would
// change (or r is nil). It is pure. The target is the equal split of the ring among the eligible
// members (active and not cordoned) in join order, the oldest first; the oldest eligible member is
// Node-0. Each member gets its target minus every token another member still holds, so a shrinking
// member keeps what stays with it at once, and a growing member gets the rest only after the holder
// released it or its lease expired (a later Plan, after the Release or Expire was applied). Node-0
// likewise goes to the oldest eligible member only once nobody else may be acting as Node-0; until
// then the members are numbered from 1, the index 0 staying with the member that holds the role. A
// new incarnation of a worker id gets nothing (no range, not Node-0) while an older incarnation of
// that id still holds something. A cordoned member gets no range and a node index after every
// eligible one (never 0): what it held becomes a hold of its older epoch, which moves on only by
// its release or expiry, like any shrinking member's.
//
// A ring in the minimal movement mode (Ring.Movement) is planned towards its target instead
// (planMinimal), under the same holds rule.
func Plan(r *Ring) *Assign {
	if r == nil {
		return nil // State.Ring of a ring nobody joined yet
	}
	if r.Movement != nil {
		return planMinimal(r)
	}
	active := r.ActiveMembers()
	if len(active) == 0 {
		return nil
	}
	eligible := r.EligibleMembers()
	first := 0
	if len(eligible) == 0 || r.Node0HeldByOthers(eligible[0].Key()) || r.otherIncarnationHolding(eligible[0].WorkerID, eligible[0].Key()) {
		first = 1
	}
	count := len(active) + first
	var split lease.Ranges
	if len(eligible) > 0 {
		split = lease.Split(len(eligible))
	}
	var out []Assignment
	next := r.LastEpoch
	plan := func(m *Member, index int, ranges lease.Ranges) {
		if m.Assigned() && m.NodeIndex == index && m.NodeCount == count && m.Ranges.Equal(ranges) {
			return
		}
		next++
		out = append(out, Assignment{
			WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: next,
			NodeIndex: index, NodeCount: count, Ranges: ranges,
		})
	}
	for i, m := range eligible {
		var ranges lease.Ranges
		if !r.otherIncarnationHolding(m.WorkerID, m.Key()) {
			ranges = lease.Ranges{split[i]}.Subtract(r.HeldByOthers(m.Key()))
		}
		plan(m, i+first, ranges)
	}
	index := first + len(eligible)
	for _, m := range active {
		if r.IsCordoned(m.WorkerID) {
			plan(m, index, nil)
			index++
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &Assign{Ring: r.Key, Assignments: out}
}

// HoldRef names an assignment of a member that the leader must see end before the tokens it gave
// can move: an older epoch still held, or the current epoch of a departed member.
type HoldRef struct {
	WorkerID    string
	Incarnation string
	Epoch       uint64
}

// PendingHolds lists what blocks the ring from settling and can only end by release or expiry. Once
// the leader's timer for one has run out, it proposes Expire{..., UpTo: Epoch, Generation:
// r.Generation}, with the generation of the state it decided on.
func PendingHolds(r *Ring) []HoldRef {
	if r == nil {
		return nil
	}
	var out []HoldRef
	for _, m := range r.SortedMembers() {
		for _, h := range m.Holds {
			out = append(out, HoldRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: h.Epoch})
		}
		if !m.Active && m.Assigned() {
			out = append(out, HoldRef{WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: m.Epoch})
		}
	}
	return out
}
