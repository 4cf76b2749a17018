package fsm

import (
	"fmt"
	"sort"

	"github.com/retryring/retryring/lease"
)

// Apply applies one command to the state. It is deterministic and idempotent: applying the same
// command twice leaves the state as applying it once. On error the state is unchanged.
func (s *State) Apply(c Command) error {
	switch c := c.(type) {
	case *RegisterCoordinator:
		cc := c.Coordinator
		s.Coordinators[cc.ID] = &cc
		return nil
	case *RemoveCoordinator:
		delete(s.Coordinators, c.ID)
		return nil
	case *Join:
		return s.applyJoin(c)
	case *Down:
		return s.applyDown(c)
	case *Leave:
		return s.applyLeave(c)
	case *Release:
		return s.applyRelease(c)
	case *Expire:
		return s.applyExpire(c)
	case *Assign:
		return s.applyAssign(c)
	case nil:
		return fmt.Errorf("%w: nil command", ErrMalformed)
	default:
		return s.Apply(pointerTo(c))
	}
}

// pointerTo turns a command value into the pointer form that Decode returns.
func pointerTo(c Command) Command {
	switch c := c.(type) {
	case RegisterCoordinator:
		return &c
	case RemoveCoordinator:
		return &c
	case Join:
		return &c
	case Down:
		return &c
	case Leave:
		return &c
	case Release:
		return &c
	case Expire:
		return &c
	case Assign:
		return &c
	}
	return nil
}

func (s *State) ringFor(k lease.RingKey) *Ring {
	id := RingID(k)
	r := s.Rings[id]
	if r == nil {
		r = &Ring{Key: k, Members: map[string]*Member{}}
		s.Rings[id] = r
	}
	return r
}

func (s *State) applyJoin(c *Join) error {
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if c.WorkerID == "" || c.Incarnation == "" {
		return fmt.Errorf("%w: join without worker id or incarnation", ErrMalformed)
	}
	r := s.ringFor(c.Ring)
	key := MemberKey(c.WorkerID, c.Incarnation)
	if m := r.Members[key]; m != nil {
		if m.Active {
			return nil
		}
		// A reconnect of the same incarnation continues what it holds.
		m.Active = true
		r.Generation++
		return nil
	}
	// A new incarnation supersedes the old one, which keeps its holds until they end.
	for _, m := range r.Members {
		if m.WorkerID == c.WorkerID && m.Active {
			m.Active = false
		}
	}
	r.Members[key] = &Member{WorkerID: c.WorkerID, Incarnation: c.Incarnation, JoinSeq: r.NextSeq, Active: true, NodeIndex: -1}
	r.NextSeq++
	r.Generation++
	return nil
}

func (s *State) member(k lease.RingKey, workerID, incarnation string) (*Ring, *Member) {
	r := s.Ring(k)
	if r == nil {
		return nil, nil
	}
	return r, r.Members[MemberKey(workerID, incarnation)]
}

func (s *State) applyDown(c *Down) error {
	r, m := s.member(c.Ring, c.WorkerID, c.Incarnation)
	if m == nil || !m.Active {
		return nil
	}
	m.Active = false
	r.Generation++
	forgetIfIdle(r, m)
	return nil
}

func (s *State) applyLeave(c *Leave) error {
	r, m := s.member(c.Ring, c.WorkerID, c.Incarnation)
	if m == nil {
		return nil
	}
	delete(r.Members, m.Key())
	r.Generation++
	return nil
}

func (s *State) applyRelease(c *Release) error {
	_, m := s.member(c.Ring, c.WorkerID, c.Incarnation)
	if m == nil {
		return fmt.Errorf("%w: %s/%s", ErrUnknownMember, c.WorkerID, c.Incarnation)
	}
	if c.Epoch > m.Epoch {
		return fmt.Errorf("%w: release of epoch %d, current %d", ErrBadEpoch, c.Epoch, m.Epoch)
	}
	m.Holds = keepHolds(m.Holds, func(h Hold) bool { return h.Epoch >= c.Epoch })
	return nil
}

func (s *State) applyExpire(c *Expire) error {
	r, m := s.member(c.Ring, c.WorkerID, c.Incarnation)
	if m == nil {
		return nil
	}
	m.Holds = keepHolds(m.Holds, func(h Hold) bool { return h.Epoch > c.UpTo })
	if !m.Active && m.Epoch <= c.UpTo {
		m.Ranges, m.Holds = nil, nil
		m.Epoch, m.NodeIndex = 0, -1
	}
	forgetIfIdle(r, m)
	return nil
}

// forgetIfIdle removes a departed member that holds nothing any more.
func forgetIfIdle(r *Ring, m *Member) {
	if !m.Active && !m.Holding() {
		delete(r.Members, m.Key())
		r.Generation++
	}
}

func keepHolds(hs []Hold, keep func(Hold) bool) []Hold {
	var out []Hold
	for _, h := range hs {
		if keep(h) {
			out = append(out, h)
		}
	}
	return out
}

// applyAssign checks the whole command against the state before changing anything: every
// assignment must be newer than the ring's last epoch (or already applied), name an active member,
// and give no token and no Node-0 role that another member holds.
func (s *State) applyAssign(c *Assign) error {
	r := s.Ring(c.Ring)
	if r == nil {
		return fmt.Errorf("%w: no ring %s", ErrUnsafeAssignment, c.Ring)
	}
	work := r.Clone()
	var todo []Assignment
	for _, a := range c.Assignments {
		m := work.Members[MemberKey(a.WorkerID, a.Incarnation)]
		if m == nil {
			return fmt.Errorf("%w: %s/%s is not a member", ErrUnsafeAssignment, a.WorkerID, a.Incarnation)
		}
		if m.Epoch >= a.Epoch {
			continue // already applied
		}
		if !m.Active || a.Epoch <= r.LastEpoch {
			return fmt.Errorf("%w: epoch %d for %s (last epoch %d, active %v)", ErrUnsafeAssignment, a.Epoch, a.WorkerID, r.LastEpoch, m.Active)
		}
		todo = append(todo, a)
	}
	if len(todo) == 0 {
		return nil
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].Epoch < todo[j].Epoch })
	for _, a := range todo {
		key := MemberKey(a.WorkerID, a.Incarnation)
		ranges := lease.Normalize(a.Ranges)
		if overlap := ranges.Intersect(work.HeldByOthers(key)); !overlap.Empty() {
			return fmt.Errorf("%w: %s would get %v held by another member", ErrUnsafeAssignment, a.WorkerID, overlap)
		}
		if a.NodeIndex == 0 && work.Node0HeldByOthers(key) {
			return fmt.Errorf("%w: %s would be Node-0 while another member may be", ErrUnsafeAssignment, a.WorkerID)
		}
		assign(work.Members[key], a, ranges)
		work.LastEpoch = a.Epoch
	}
	*r = *work
	return nil
}

// assign installs a as m's current assignment; what the old assignment gave and the new one does not
// becomes a hold of the old epoch.
func assign(m *Member, a Assignment, ranges lease.Ranges) {
	if m.Assigned() {
		h := Hold{Epoch: m.Epoch, Ranges: m.Ranges.Subtract(ranges), Node0: m.IsNode0() && a.NodeIndex != 0}
		if !h.Ranges.Empty() || h.Node0 {
			m.Holds = append(m.Holds, h)
		}
	}
	m.Epoch, m.NodeIndex, m.NodeCount, m.Ranges = a.Epoch, a.NodeIndex, a.NodeCount, ranges
}
