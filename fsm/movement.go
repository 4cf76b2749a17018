package fsm

import (
	"fmt"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// Movement modes of a ring (SetMovement.Mode).
const (
	// ModeContiguous is the default: the equal contiguous split of the ring among the eligible
	// members in join order (Plan).
	ModeContiguous = "contiguous"
	// ModeMinimal is the minimal-movement assignment of lease/minimal: shares within a tolerance
	// of the mean, about 1/(N+1) of the ring moved per join, at most MaxRanges ranges per member.
	ModeMinimal = "minimal"
)

// SetMovement sets a ring's movement mode (FSM version 6). It is a replicated setting of the ring,
// not a flag of each coordinator: two leaders planning with different modes would undo each
// other's plans. Tolerance and MaxRanges are the parameters of ModeMinimal (lease/minimal.Config;
// 0 means its default) and must be 0 with ModeContiguous. The ring need not exist yet: an
// operator may choose the mode before the first worker joins. AtMs is the proposing leader's wall
// clock, for people (Movement.SinceMs).
//
// It is a type of its own, introduced by FSM version 6: a node of version 5 would plan the ring
// contiguously while its peers plan it minimally, so the version gate keeps it out until every
// voter runs version 6, and a node that meets it anyway halts.
type SetMovement struct {
	Ring      lease.RingKey `json:"ring"`
	Mode      string        `json:"mode"`
	Tolerance float64       `json:"tolerance,omitempty"`
	MaxRanges int           `json:"max_ranges,omitempty"`
	AtMs      int64         `json:"at_ms"`
}

// Type implements Command.
func (SetMovement) Type() CommandType { return TypeSetMovement }

// Movement is a ring's minimal-movement setting; a ring without one (nil) is planned contiguously.
type Movement struct {
	// Tolerance and MaxRanges are the parameters as committed, defaults filled in: the ring's
	// plans do not change when a later build changes a default.
	Tolerance float64 `json:"tolerance"`
	MaxRanges int     `json:"max_ranges"`
	// StepMoves is the churn budget of one even-out step (lease/minimal's default, filled in when
	// the mode was set), so that every leader spends the same.
	StepMoves int `json:"step_moves"`
	// SinceMs is when the setting last changed: the proposing leader's wall clock, Unix ms, for
	// people only.
	SinceMs int64 `json:"since_ms,omitempty"`
	// Target is the assignment the plans lead to, one slot per worker id in node-index order: in
	// the replicated state, so that a new leader resumes a rebalance where the last one was. It
	// follows the members as commands are applied (Ring.followMembers), HandOn and EvenOut.
	Target []Slot `json:"target,omitempty"`
	// EvenOutSteps counts the even-out steps applied (EvenOut.Step names the next).
	EvenOutSteps uint64 `json:"even_out_steps,omitempty"`
}

// Config is the setting as a lease/minimal configuration.
func (m *Movement) Config() minimal.Config {
	return minimal.Config{Tolerance: m.Tolerance, MaxRanges: m.MaxRanges, StepMoves: m.StepMoves}.WithDefaults()
}

// Mode is the ring's movement mode: ModeMinimal when it has a Movement, else ModeContiguous.
func (r *Ring) Mode() string {
	if r != nil && r.Movement != nil {
		return ModeMinimal
	}
	return ModeContiguous
}

func (m *Movement) clone() *Movement {
	if m == nil {
		return nil
	}
	out := *m
	out.Target = nil
	for _, s := range m.Target {
		s.Ranges = append(lease.Ranges(nil), s.Ranges...)
		out.Target = append(out.Target, s)
	}
	return &out
}

// Validate refuses a mode other than the two, parameters with ModeContiguous, and parameters the
// bounds of lease/minimal do not hold for (minimal.ErrConfig, with what is wrong).
func (c SetMovement) Validate() error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	switch c.Mode {
	case ModeContiguous:
		if c.Tolerance != 0 || c.MaxRanges != 0 {
			return fmt.Errorf("%w: tolerance and max ranges are parameters of the %s mode only", ErrMalformed, ModeMinimal)
		}
		return nil
	case ModeMinimal:
		if err := (minimal.Config{Tolerance: c.Tolerance, MaxRanges: c.MaxRanges}).Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return nil
	}
	return fmt.Errorf("%w: movement mode %q: want %s or %s", ErrMalformed, c.Mode, ModeContiguous, ModeMinimal)
}

// applySetMovement installs the setting. Setting what is in force already changes nothing
// (SinceMs included), so the command is idempotent. A ring that the contiguous mode leaves
// with nothing at all (no member ever, no controls) is forgotten again, as setControls does.
func (s *State) applySetMovement(c *SetMovement) error {
	if err := c.Validate(); err != nil {
		return err
	}
	r := s.Ring(c.Ring)
	if c.Mode == ModeContiguous {
		if r == nil || r.Movement == nil {
			return nil
		}
		r.Movement = nil
		if r.NextSeq == 0 && len(r.Members) == 0 && r.Controls == nil {
			delete(s.Rings, RingID(c.Ring))
		}
		return nil
	}
	cfg := minimal.Config{Tolerance: c.Tolerance, MaxRanges: c.MaxRanges}.WithDefaults()
	if r == nil {
		r = s.ringFor(c.Ring)
	}
	switch {
	case r.Movement == nil:
		settled := r.Settled()
		r.Movement = &Movement{Tolerance: cfg.Tolerance, MaxRanges: cfg.MaxRanges, StepMoves: cfg.StepMoves, SinceMs: c.AtMs}
		r.seedTarget(settled)
	case r.Movement.Tolerance != cfg.Tolerance || r.Movement.MaxRanges != cfg.MaxRanges:
		// New parameters keep the target: they bound the changes to come.
		r.Movement.Tolerance, r.Movement.MaxRanges, r.Movement.SinceMs = cfg.Tolerance, cfg.MaxRanges, c.AtMs
	}
	return nil
}
