package fsm

import (
	"fmt"
	"time"

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
// other's plans, and two leaders waiting different return delays or spending different churn
// budgets would make a failover change the ring's pace. Tolerance, MaxRanges, ReturnDelayMs,
// IdleMs and StepMoves are the parameters of ModeMinimal (lease/minimal.Config; 0 means its
// default) and must be 0 with ModeContiguous. The ring need not exist yet: an
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
	// ReturnDelayMs is how long a worker id that left keeps its ranges for a new incarnation.
	ReturnDelayMs int64 `json:"return_delay_ms,omitempty"`
	// IdleMs is how long the ring stays settled before an even-out step; StepMoves is the most
	// moves of one step: StepMoves per IdleMs is the even-out's churn budget.
	IdleMs    int64 `json:"idle_ms,omitempty"`
	StepMoves int   `json:"step_moves,omitempty"`
	AtMs      int64 `json:"at_ms"`
}

// Bounds of the minimal mode's timing parameters (SetMovement.Validate). A return delay shorter
// than a second would hand a restarting worker's ranges on before it can be back; one longer than
// ten minutes leaves a crashed worker's ranges undrained that long (their windows wait). An idle
// time under a second would run the even-out as fast as the leader can commit; one over an
// hour would leave the ring uneven after a change for most of a day's windows.
const (
	MinReturnDelay = time.Second
	MaxReturnDelay = 10 * time.Minute
	MinIdle        = time.Second
	MaxIdle        = time.Hour
	MaxStepMoves   = 1024
)

// Type implements Command.
func (SetMovement) Type() CommandType { return TypeSetMovement }

// Movement is a ring's minimal-movement setting; a ring without one (nil) is planned contiguously.
type Movement struct {
	// Tolerance and MaxRanges are the parameters as committed, defaults filled in: the ring's
	// plans do not change when a later build changes a default.
	Tolerance float64 `json:"tolerance"`
	MaxRanges int     `json:"max_ranges"`
	// StepMoves is the churn budget of one even-out step, IdleMs how long the ring stays settled
	// before one, and ReturnDelayMs how long a leaver's ranges wait for its return (defaults
	// filled in when the mode was set), so that every leader spends and waits the same. A
	// state written before the two times were settings holds 0 for them: the defaults.
	StepMoves     int   `json:"step_moves"`
	IdleMs        int64 `json:"idle_ms,omitempty"`
	ReturnDelayMs int64 `json:"return_delay_ms,omitempty"`
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
	return minimal.Config{Tolerance: m.Tolerance, MaxRanges: m.MaxRanges, StepMoves: m.StepMoves,
		ReturnDelay: time.Duration(m.ReturnDelayMs) * time.Millisecond, Idle: time.Duration(m.IdleMs) * time.Millisecond}.WithDefaults()
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
		if c.Tolerance != 0 || c.MaxRanges != 0 || c.ReturnDelayMs != 0 || c.IdleMs != 0 || c.StepMoves != 0 {
			return fmt.Errorf("%w: tolerance, max ranges, return delay, idle and step moves are parameters of the %s mode only", ErrMalformed, ModeMinimal)
		}
		return nil
	case ModeMinimal:
		delay, idle := time.Duration(c.ReturnDelayMs)*time.Millisecond, time.Duration(c.IdleMs)*time.Millisecond
		switch {
		case c.ReturnDelayMs != 0 && (delay < MinReturnDelay || delay > MaxReturnDelay):
			return fmt.Errorf("%w: return delay %v is not in [%v, %v]", ErrMalformed, delay, MinReturnDelay, MaxReturnDelay)
		case c.IdleMs != 0 && (idle < MinIdle || idle > MaxIdle):
			return fmt.Errorf("%w: idle %v is not in [%v, %v]", ErrMalformed, idle, MinIdle, MaxIdle)
		case c.StepMoves < 0 || c.StepMoves > MaxStepMoves:
			return fmt.Errorf("%w: step moves %d is not in [1, %d]", ErrMalformed, c.StepMoves, MaxStepMoves)
		}
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
	cfg := minimal.Config{Tolerance: c.Tolerance, MaxRanges: c.MaxRanges, StepMoves: c.StepMoves,
		ReturnDelay: time.Duration(c.ReturnDelayMs) * time.Millisecond, Idle: time.Duration(c.IdleMs) * time.Millisecond}.WithDefaults()
	want := Movement{Tolerance: cfg.Tolerance, MaxRanges: cfg.MaxRanges, StepMoves: cfg.StepMoves,
		ReturnDelayMs: cfg.ReturnDelay.Milliseconds(), IdleMs: cfg.Idle.Milliseconds(), SinceMs: c.AtMs}
	if r == nil {
		r = s.ringFor(c.Ring)
	}
	switch {
	case r.Movement == nil:
		settled := r.Settled()
		r.Movement = &want
		r.seedTarget(settled)
	case !r.Movement.sameParameters(want):
		// New parameters keep the target: they bound the changes to come.
		want.Target, want.EvenOutSteps = r.Movement.Target, r.Movement.EvenOutSteps
		*r.Movement = want
	}
	return nil
}

// sameParameters reports whether m and o are the same setting (their defaults filled in), the
// target and times aside.
func (m *Movement) sameParameters(o Movement) bool {
	return m.Config() == o.Config()
}
