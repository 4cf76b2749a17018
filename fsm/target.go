package fsm

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// Slot is one worker id's place in a minimal-mode ring's target (Movement.Target): its node index
// is its place in the target, its ranges what the target gives it. A reserved slot is a worker id
// that has no eligible member any more: it keeps its index and ranges for a new incarnation of the
// id (a rolling restart moves nothing) until the leader commits HandOn.
type Slot struct {
	WorkerID string       `json:"worker_id"`
	Ranges   lease.Ranges `json:"ranges,omitempty"`
	Reserved bool         `json:"reserved,omitempty"`
	// ReservedAt is the ring generation at which the slot was reserved: a HandOn decided on an
	// older generation (the id came back and left again since) changes nothing.
	ReservedAt uint64 `json:"reserved_at,omitempty"`
}

// HandOn hands on the ranges of a reserved slot of a minimal-mode ring to the least loaded active
// members (lease/minimal's hand-on): the leader proposes it once the slot has been reserved for
// the return delay by its own clock, as it proposes Expire, so that the state never reads a clock.
// Generation is the ring's generation in the state the leader decided on. A HandOn of a slot that
// is not reserved, or was reserved after Generation, changes nothing.
type HandOn struct {
	Ring       lease.RingKey `json:"ring"`
	WorkerID   string        `json:"worker_id"`
	Generation uint64        `json:"generation"`
}

// Type implements Command.
func (HandOn) Type() CommandType { return TypeHandOn }

// reservedMark is the leave time every reserved slot has for lease/minimal: the FSM keeps no time,
// it hands on by HandOn only, so the time only has to be non-zero.
var reservedMark = time.Unix(0, 0)

// planner is the setting's planner; the setting was validated when committed.
func (m *Movement) planner() *minimal.Planner {
	p, err := minimal.NewPlanner(m.Config())
	if err != nil {
		panic(fmt.Sprintf("fsm: a committed movement setting is invalid: %v", err))
	}
	return p
}

func (m *Movement) assignment() minimal.Assignment {
	a := minimal.Assignment{Members: make([]minimal.Member, len(m.Target))}
	for i, s := range m.Target {
		a.Members[i] = minimal.Member{ID: s.WorkerID, Ranges: s.Ranges}
		if s.Reserved {
			a.Members[i].LeftAt = reservedMark
		}
	}
	return a
}

// install makes a the target; a slot that stays reserved keeps its ReservedAt, a newly reserved
// one gets generation.
func (m *Movement) install(a minimal.Assignment, generation uint64) {
	old := map[string]Slot{}
	for _, s := range m.Target {
		old[s.WorkerID] = s
	}
	m.Target = make([]Slot, len(a.Members))
	for i, am := range a.Members {
		s := Slot{WorkerID: am.ID, Ranges: append(lease.Ranges(nil), am.Ranges...)}
		if !am.Active() {
			s.Reserved, s.ReservedAt = true, generation
			if o, ok := old[am.ID]; ok && o.Reserved {
				s.ReservedAt = o.ReservedAt
			}
		}
		m.Target[i] = s
	}
	if len(m.Target) == 0 {
		m.Target = nil
	}
}

// followMembers brings a minimal-mode ring's target up to its eligible members, after a command
// that may have changed them: a cordoned worker id's ranges are handed on at once (a cordon
// drains, it does not wait for a return); an id with no eligible member any more is reserved; an
// eligible id the target does not know joins (taking from the most loaded), and a reserved one
// returns to its ranges. It is deterministic, so every node and the leader's preview agree.
func (r *Ring) followMembers() {
	mv := r.Movement
	if mv == nil {
		return
	}
	p := mv.planner()
	a := mv.assignment()
	eligible := r.EligibleMembers()
	isEligible := map[string]bool{}
	for _, m := range eligible {
		isEligible[m.WorkerID] = true
	}
	// The planner's errors cannot occur here: each call is guarded by the check before it (a leave
	// of an active slot, a hand-on of a slot reserved just now or before, a join of an id that is
	// not active in the target).
	for _, s := range mv.Target {
		if !s.Reserved && !isEligible[s.WorkerID] {
			a, _, _ = p.Leave(a, s.WorkerID, reservedMark)
		}
		if r.IsCordoned(s.WorkerID) {
			a, _, _ = p.HandOn(a, s.WorkerID)
		}
	}
	for _, m := range eligible {
		if i := a.Index(m.WorkerID); i < 0 || !a.Members[i].Active() {
			a, _, _ = p.Join(a, m.WorkerID)
		}
	}
	mv.install(a, r.Generation)
}

// seedTarget is the target of a ring switched to the minimal mode: a ring that was settled (in the
// contiguous mode) keeps its assignment as it is, in node-index order (the switch moves nothing);
// else the eligible members join one by one in join order, and the plans reach that target by the
// usual safe steps.
func (r *Ring) seedTarget(settled bool) {
	mv := r.Movement
	mv.Target = nil
	eligible := r.EligibleMembers()
	if settled && len(eligible) > 0 {
		for _, m := range eligible { // settled: in node-index order already
			mv.Target = append(mv.Target, Slot{WorkerID: m.WorkerID, Ranges: append(lease.Ranges(nil), m.Ranges...)})
		}
		return
	}
	p := mv.planner()
	var a minimal.Assignment
	for _, m := range eligible {
		a, _, _ = p.Join(a, m.WorkerID)
	}
	mv.install(a, r.Generation)
}

// applyHandOn hands on a reserved slot's ranges.
func (s *State) applyHandOn(c *HandOn) error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	if c.WorkerID == "" {
		return fmt.Errorf("%w: hand-on without a worker id", ErrMalformed)
	}
	r := s.Ring(c.Ring)
	if r == nil || r.Movement == nil {
		return nil
	}
	mv := r.Movement
	i := mv.assignment().Index(c.WorkerID)
	if i < 0 || !mv.Target[i].Reserved || mv.Target[i].ReservedAt > c.Generation {
		return nil
	}
	a, _, err := mv.planner().HandOn(mv.assignment(), c.WorkerID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	mv.install(a, r.Generation)
	return nil
}

// Reservations lists the reserved slots of a minimal-mode ring: what the leader hands on
// (HandOn) once each has been reserved for the return delay.
func (r *Ring) Reservations() []Slot {
	if r == nil || r.Movement == nil {
		return nil
	}
	var out []Slot
	for _, s := range r.Movement.Target {
		if s.Reserved {
			out = append(out, s)
		}
	}
	return out
}

// planMinimal is Plan in the minimal mode: each eligible member gets its slot's index and its
// slot's ranges minus every token another member still holds (the holds rule of Plan), nothing
// while another incarnation of its id holds something. A member whose index and ranges do not
// change gets no new assignment, even when the member count changed: NodeCount is the count at
// its last assignment (the worker uses index/count only to phase its rate limit, so a stale count
// costs no safety), and a join then gives new epochs only to the members it takes from.
//
// The slot of index 0 is Node-0 once nobody else may be acting as Node-0; until then its member
// gets the index after every other (count grows by one), so that no index is shared while the
// role moves. Cordoned members get the indexes after the target's, no range, never Node-0.
func planMinimal(r *Ring) *Assign {
	mv := r.Movement
	if len(r.ActiveMembers()) == 0 {
		return nil
	}
	byID := map[string]*Member{}
	for _, m := range r.EligibleMembers() {
		byID[m.WorkerID] = m
	}
	var cordoned []*Member
	for _, m := range r.ActiveMembers() {
		if r.IsCordoned(m.WorkerID) {
			cordoned = append(cordoned, m)
		}
	}
	first := max(len(mv.Target), 1) // a cordoned member's first index: never Node-0
	count := first + len(cordoned)
	node0 := -1 // the index of the target's Node-0 candidate until it may take the role
	if len(mv.Target) > 0 {
		if m := byID[mv.Target[0].WorkerID]; m != nil && !mv.Target[0].Reserved &&
			(r.Node0HeldByOthers(m.Key()) || r.otherIncarnationHolding(m.WorkerID, m.Key())) {
			node0 = count
			count++
		}
	}
	var out []Assignment
	next := r.LastEpoch
	plan := func(m *Member, index int, ranges lease.Ranges) {
		if m.Assigned() && m.NodeIndex == index && m.Ranges.Equal(ranges) {
			return
		}
		next++
		out = append(out, Assignment{
			WorkerID: m.WorkerID, Incarnation: m.Incarnation, Epoch: next,
			NodeIndex: index, NodeCount: count, Ranges: ranges,
		})
	}
	for i, s := range mv.Target {
		m := byID[s.WorkerID]
		if m == nil || s.Reserved {
			continue
		}
		var ranges lease.Ranges
		if !r.otherIncarnationHolding(m.WorkerID, m.Key()) {
			ranges = s.Ranges.Subtract(r.HeldByOthers(m.Key()))
		}
		index := i
		if i == 0 && node0 >= 0 {
			index = node0
		}
		plan(m, index, ranges)
	}
	for k, m := range cordoned {
		plan(m, first+k, nil)
	}
	if len(out) == 0 {
		return nil
	}
	return &Assign{Ring: r.Key, Assignments: out}
}

// settledMinimal is Settled in the minimal mode: nothing reserved, every eligible member at its
// slot (index and ranges), every cordoned one with nothing after them.
func (r *Ring) settledMinimal() bool {
	mv := r.Movement
	eligible := r.EligibleMembers()
	if len(eligible) == 0 {
		// Nobody to plan for: the last worker's slots stay reserved for whoever comes next.
		return r.cordonedSettled(1)
	}
	if len(mv.Target) != len(eligible) {
		return false
	}
	byID := map[string]*Member{}
	for _, m := range eligible {
		byID[m.WorkerID] = m
	}
	for i, s := range mv.Target {
		m := byID[s.WorkerID]
		if s.Reserved || m == nil || !m.Assigned() || m.NodeIndex != i || !m.Ranges.Equal(s.Ranges) {
			return false
		}
	}
	return r.cordonedSettled(max(len(mv.Target), 1))
}

// cordonedSettled reports whether every cordoned active member has an assignment with no range
// at an index from first on.
func (r *Ring) cordonedSettled(first int) bool {
	for _, m := range r.ActiveMembers() {
		if r.IsCordoned(m.WorkerID) && (!m.Assigned() || m.NodeIndex < first || !m.Ranges.Empty()) {
			return false
		}
	}
	return true
}

// EvenOut is one step of the idle even-out of a minimal-mode ring (lease/minimal's EvenOut):
// shares towards the mean to one token, members with more than MergeAbove ranges merged, at most
// StepMoves ranges moved. The leader proposes it once the ring has been idle (settled, nothing
// reserved) for a while by its own clock; the steps are spaced by that wait, which bounds the
// churn. Generation and Step are the ring's generation and Movement.EvenOutSteps in the state the
// leader decided on: a step decided before a membership change, or applied already, changes
// nothing, so the command is idempotent. It changes nothing either while the ring is not settled
// (Ring.Settled: a change or an earlier step still in flight).
type EvenOut struct {
	Ring       lease.RingKey `json:"ring"`
	Generation uint64        `json:"generation"`
	Step       uint64        `json:"step"`
}

// Type implements Command.
func (EvenOut) Type() CommandType { return TypeEvenOut }

// applyEvenOut runs one even-out step on the target; the plans then move the pieces.
func (s *State) applyEvenOut(c *EvenOut) error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	r := s.Ring(c.Ring)
	if r == nil || r.Movement == nil || r.Generation != c.Generation || r.Movement.EvenOutSteps != c.Step || !r.Settled() {
		return nil
	}
	a, moves := r.Movement.planner().EvenOut(r.Movement.assignment())
	if len(moves) == 0 {
		return nil
	}
	r.Movement.install(a, r.Generation)
	r.Movement.EvenOutSteps++
	return nil
}

// EvenedOut reports whether a minimal-mode ring's target needs no even-out step: every share
// within one token of the mean and no member above MergeAbove ranges (lease/minimal's Settled).
// True for a contiguous ring.
func (r *Ring) EvenedOut() bool {
	if r == nil || r.Movement == nil {
		return true
	}
	return r.Movement.planner().Settled(r.Movement.assignment())
}
