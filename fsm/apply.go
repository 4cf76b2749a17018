package fsm

import (
	"fmt"
	"reflect"
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
		return s.follow(c.Ring, s.applyJoin(c))
	case *Down:
		return s.follow(c.Ring, s.applyDown(c))
	case *Leave:
		return s.follow(c.Ring, s.applyLeave(c))
	case *Release:
		return s.applyRelease(c)
	case *Expire:
		return s.follow(c.Ring, s.applyExpire(c))
	case *Assign:
		return s.applyAssign(c)
	case *CommitTiming:
		return s.applyCommitTiming(c)
	case *RetireTiming:
		return s.applyRetireTiming(c)
	case *Pause:
		return s.applyPause(c)
	case *Resume:
		return s.applyResume(c)
	case *Limit:
		return s.applyLimit(c)
	case *Reconcile:
		return s.applyReconcile(c)
	case *Cordon:
		return s.follow(c.Ring, s.applyCordon(c))
	case *EpochFloor:
		return s.applyEpochFloor(c)
	case *SetMovement:
		return s.applySetMovement(c)
	case *HandOn:
		return s.applyHandOn(c)
	case *EvenOut:
		return s.applyEvenOut(c)
	case *InTerm:
		// Its term is checked against the log entry's, which only FSM.Apply knows.
		return fmt.Errorf("%w: an in_term command applies only as a raft log entry (FSM.Apply)", ErrMalformed)
	case nil:
		return fmt.Errorf("%w: nil command", ErrMalformed)
	default:
		// A command value: apply it in the pointer form Decode returns.
		v := reflect.ValueOf(c)
		if v.Kind() == reflect.Pointer {
			return fmt.Errorf("%w: %T is not a command of this build", ErrMalformed, c)
		}
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		return s.Apply(p.Interface().(Command))
	}
}

// follow brings the target of a minimal-mode ring up to its members after a command that may have
// changed them was applied (err nil); it returns err.
func (s *State) follow(k lease.RingKey, err error) error {
	if r := s.Ring(k); err == nil && r != nil {
		r.followMembers()
	}
	return err
}

func (s *State) ringFor(k lease.RingKey) *Ring {
	id := RingID(k)
	r := s.Rings[id]
	if r == nil {
		r = &Ring{Key: k, Members: map[string]*Member{}, LastEpoch: s.EpochFloor}
		s.Rings[id] = r
	}
	return r
}

func (s *State) applyJoin(c *Join) error {
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if c.WorkerID == "" || c.Incarnation == "" {
		return fmt.Errorf("%w: join without worker id or incarnation", ErrMalformed)
	}
	r := s.ringFor(c.Ring)
	key := MemberKey(c.WorkerID, c.Incarnation)
	m := r.Members[key]
	if m != nil && m.Active {
		return nil
	}
	// The joining incarnation supersedes every other active incarnation of the worker id (the last
	// Join wins, so one worker id never has two active members, even when a superseded process
	// reconnects). A superseded one keeps its holds until they end; one that holds nothing is
	// forgotten at once: nothing could ever expire it, and the ring would never settle.
	for _, other := range r.Members {
		if other.WorkerID == c.WorkerID && other.Active {
			other.Active = false
			forgetIfIdle(r, other)
		}
	}
	r.Generation++
	if m != nil {
		// A reconnect of the same incarnation continues what it holds.
		m.Active, m.ActiveSince = true, r.Generation
		return nil
	}
	r.Members[key] = &Member{WorkerID: c.WorkerID, Incarnation: c.Incarnation, JoinSeq: r.NextSeq, ActiveSince: r.Generation, Active: true, NodeIndex: -1}
	r.NextSeq++
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
	r.pruneCordons()
	return nil
}

func (s *State) applyLeave(c *Leave) error {
	r, m := s.member(c.Ring, c.WorkerID, c.Incarnation)
	if m == nil {
		return nil
	}
	delete(r.Members, m.Key())
	r.Generation++
	r.pruneCordons()
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
	if m == nil || m.ActiveSince > c.Generation {
		return nil
	}
	m.Holds = keepHolds(m.Holds, func(h Hold) bool { return h.Epoch > c.UpTo })
	if !m.Active && m.Epoch <= c.UpTo {
		m.Ranges, m.Holds = nil, nil
		m.Epoch, m.NodeIndex = 0, -1
	}
	forgetIfIdle(r, m)
	r.pruneCordons()
	return nil
}

// forgetIfIdle removes a departed member that holds nothing any more. Its callers other than Join
// then drop the cordon of its worker id if no incarnation of it is left (Ring.pruneCordons); a
// Join does not, since its own incarnation keeps the worker id, and with it the cordon, across a
// restart.
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
// assignment must be newer than the ring's last epoch, name an active member, give no token and no
// Node-0 role that another member holds, and give nothing to a member while another incarnation of
// its worker id holds something. An assignment that is already installed, exactly, is skipped, so
// the command is idempotent. A nil result therefore means that every assignment of the command is
// now its member's current assignment, as written: the leader may send what it proposed. A plan
// made on an older state whose epochs were meanwhile installed with other content, or overtaken,
// is refused instead of being reported as applied.
func (s *State) applyAssign(c *Assign) error {
	r := s.Ring(c.Ring)
	if r == nil {
		return fmt.Errorf("%w: no ring %s", ErrUnsafeAssignment, c.Ring)
	}
	work := r.Clone()
	var todo []Assignment
	named := map[string]bool{}
	epochs := map[uint64]bool{}
	for _, a := range c.Assignments {
		if err := a.validate(); err != nil {
			return err
		}
		key := MemberKey(a.WorkerID, a.Incarnation)
		if named[key] || epochs[a.Epoch] {
			return fmt.Errorf("%w: %s/%s or epoch %d named twice", ErrMalformed, a.WorkerID, a.Incarnation, a.Epoch)
		}
		named[key], epochs[a.Epoch] = true, true
		m := work.Members[key]
		if m == nil {
			return fmt.Errorf("%w: %s/%s is not a member", ErrUnsafeAssignment, a.WorkerID, a.Incarnation)
		}
		switch {
		case m.Epoch == a.Epoch && m.NodeIndex == a.NodeIndex && m.NodeCount == a.NodeCount && m.Ranges.Equal(lease.Normalize(a.Ranges)):
			continue // already applied
		case m.Epoch >= a.Epoch:
			return fmt.Errorf("%w: %s/%s is at epoch %d with other content than this plan's epoch %d", ErrUnsafeAssignment, a.WorkerID, a.Incarnation, m.Epoch, a.Epoch)
		case !m.Active || a.Epoch <= r.LastEpoch:
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
		if (!ranges.Empty() || a.NodeIndex == 0) && work.otherIncarnationHolding(a.WorkerID, key) {
			return fmt.Errorf("%w: %s/%s would get a range or Node-0 while another incarnation holds one", ErrUnsafeAssignment, a.WorkerID, a.Incarnation)
		}
		assign(work.Members[key], a, ranges)
		work.LastEpoch = a.Epoch
	}
	*r = *work
	return nil
}

// validate refuses what no plan produces. A range whose start is past its end matters most: set
// operations do not see it, so it would slip through the exclusivity check.
func (a Assignment) validate() error {
	if a.Epoch == 0 {
		return fmt.Errorf("%w: %s/%s epoch 0", ErrMalformed, a.WorkerID, a.Incarnation)
	}
	if a.NodeIndex < 0 || a.NodeIndex >= a.NodeCount {
		return fmt.Errorf("%w: %s/%s node index %d of %d", ErrMalformed, a.WorkerID, a.Incarnation, a.NodeIndex, a.NodeCount)
	}
	for _, rg := range a.Ranges {
		if rg.Start > rg.End {
			return fmt.Errorf("%w: %s/%s range %v starts past its end", ErrMalformed, a.WorkerID, a.Incarnation, rg)
		}
	}
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
