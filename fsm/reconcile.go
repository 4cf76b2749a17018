package fsm

import (
	"fmt"

	"github.com/retryring/retryring/lease"
)

// Reconcile is what one pass of the leader decided for one ring, committed as one entry: the
// releases its workers asked for, the joins, downs and expiries the leader decided, and the plan
// it made on the state those changes produce. A join storm of a thousand workers thus costs a few
// entries per ring, not one per event, and the plan never waits for a commit of its own.
//
// Apply applies the parts in this order: Releases, Joins, Downs, Expires, then Assignments, each
// exactly as the command of its own type (Commands) would be applied, with two differences that
// make the entry idempotent as a whole: a release of a member that is not in the ring changes
// nothing (it holds nothing, so the release has nothing to free; the standalone Release refuses
// it with ErrUnknownMember), and an entry whose assignments are all installed already was applied
// before and changes nothing.
//
// The entry is all or nothing: when any part is refused (an unsafe or stale plan among them) the
// whole entry is refused with that part's error and the state is unchanged. The membership changes
// are not lost by that: the leader decides them again on its next pass from the committed state
// and its connections, and plans again on what they produce. Keeping the rule every command has
// (on error, nothing changed) keeps the leader's one rule for sending (send what a nil response
// confirmed) and lets a refusal be retried as a whole; a refusal needs an entry that changed the
// ring in between (a Leave committed by a request handler), which is rare.
type Reconcile struct {
	Ring     lease.RingKey `json:"ring"`
	Releases []ReleaseRef  `json:"releases,omitempty"`
	Joins    []MemberRef   `json:"joins,omitempty"`
	Downs    []MemberRef   `json:"downs,omitempty"`
	Expires  []ExpireRef   `json:"expires,omitempty"`
	// Assignments is the plan (Plan) of the ring as the changes above leave it; empty when it
	// would change nothing.
	Assignments []Assignment `json:"assignments,omitempty"`
}

// MemberRef names a member of the entry's ring.
type MemberRef struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
}

// ReleaseRef is a Release of the entry's ring.
type ReleaseRef struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	Epoch       uint64 `json:"epoch"`
}

// ExpireRef is an Expire of the entry's ring.
type ExpireRef struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	UpTo        uint64 `json:"up_to"`
	Generation  uint64 `json:"generation"`
}

// Type implements Command.
func (Reconcile) Type() CommandType { return TypeReconcile }

// Empty reports whether the entry carries nothing at all.
func (c *Reconcile) Empty() bool {
	return len(c.Releases)+len(c.Joins)+len(c.Downs)+len(c.Expires)+len(c.Assignments) == 0
}

// Commands are the entry's parts as commands of their own, in the order Apply applies them: what
// a leader proposes one by one while the version gate keeps Reconcile out.
func (c *Reconcile) Commands() []Command {
	var out []Command
	for _, r := range c.Releases {
		out = append(out, &Release{Ring: c.Ring, WorkerID: r.WorkerID, Incarnation: r.Incarnation, Epoch: r.Epoch})
	}
	for _, j := range c.Joins {
		out = append(out, &Join{Ring: c.Ring, WorkerID: j.WorkerID, Incarnation: j.Incarnation})
	}
	for _, d := range c.Downs {
		out = append(out, &Down{Ring: c.Ring, WorkerID: d.WorkerID, Incarnation: d.Incarnation})
	}
	for _, e := range c.Expires {
		out = append(out, &Expire{Ring: c.Ring, WorkerID: e.WorkerID, Incarnation: e.Incarnation, UpTo: e.UpTo, Generation: e.Generation})
	}
	if len(c.Assignments) > 0 {
		out = append(out, &Assign{Ring: c.Ring, Assignments: c.Assignments})
	}
	return out
}

// validate refuses what no pass of a leader produces, and with it every combination whose second
// application would differ from the first: a member both joined and downed (or named twice), or
// two incarnations of one worker id joined in one entry (each would supersede the other again).
func (c *Reconcile) validate() error {
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if c.Empty() {
		return fmt.Errorf("%w: reconcile of ring %s carries nothing", ErrMalformed, c.Ring)
	}
	named := map[string]bool{}
	joined := map[string]bool{}
	check := func(workerID, incarnation string) error {
		if workerID == "" || incarnation == "" {
			return fmt.Errorf("%w: reconcile names a member without worker id or incarnation", ErrMalformed)
		}
		return nil
	}
	for _, m := range append(append([]MemberRef(nil), c.Joins...), c.Downs...) {
		if err := check(m.WorkerID, m.Incarnation); err != nil {
			return err
		}
		key := MemberKey(m.WorkerID, m.Incarnation)
		if named[key] {
			return fmt.Errorf("%w: reconcile joins or downs %s/%s twice", ErrMalformed, m.WorkerID, m.Incarnation)
		}
		named[key] = true
	}
	for _, m := range c.Joins {
		if joined[m.WorkerID] {
			return fmt.Errorf("%w: reconcile joins two incarnations of %s", ErrMalformed, m.WorkerID)
		}
		joined[m.WorkerID] = true
	}
	for _, r := range c.Releases {
		if err := check(r.WorkerID, r.Incarnation); err != nil {
			return err
		}
	}
	for _, e := range c.Expires {
		if err := check(e.WorkerID, e.Incarnation); err != nil {
			return err
		}
	}
	return nil
}

// applyReconcile applies the parts to a copy of the ring and installs the copy only if every part
// was accepted, so that a refusal changes nothing.
func (s *State) applyReconcile(c *Reconcile) error {
	if err := c.validate(); err != nil {
		return err
	}
	id := RingID(c.Ring)
	r := s.Rings[id]
	if r != nil && len(c.Assignments) > 0 && allInstalled(r, c.Assignments) {
		return nil
	}
	work := &State{Rings: map[string]*Ring{}, EpochFloor: s.EpochFloor}
	if r != nil {
		work.Rings[id] = r.Clone()
	}
	for _, cmd := range c.Commands() {
		if rel, ok := cmd.(*Release); ok {
			if _, m := work.member(rel.Ring, rel.WorkerID, rel.Incarnation); m == nil {
				continue
			}
		}
		if err := work.Apply(cmd); err != nil {
			return fmt.Errorf("reconcile of ring %s: %s %w", c.Ring, cmd.Type(), err)
		}
	}
	if wr := work.Rings[id]; wr != nil {
		s.Rings[id] = wr
	}
	return nil
}

// allInstalled reports whether every assignment is its member's current assignment, exactly.
func allInstalled(r *Ring, as []Assignment) bool {
	for _, a := range as {
		m := r.Members[MemberKey(a.WorkerID, a.Incarnation)]
		if m == nil || m.Epoch != a.Epoch || m.NodeIndex != a.NodeIndex || m.NodeCount != a.NodeCount || !m.Ranges.Equal(lease.Normalize(a.Ranges)) {
			return false
		}
	}
	return true
}
