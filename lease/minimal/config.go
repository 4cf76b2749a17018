package minimal

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Errors of the package. Each is wrapped with the detail of the call that met it.
var (
	// ErrConfig is a Config whose Validate failed.
	ErrConfig = errors.New("minimal: bad config")
	// ErrActiveMember is a Join of a worker id that is already an active member.
	ErrActiveMember = errors.New("minimal: already an active member")
	// ErrNotMember is a Leave of a worker id that is not an active member.
	ErrNotMember = errors.New("minimal: not an active member")
	// ErrNotReserved is a HandOn of a worker id that did not leave (or is no member at all).
	ErrNotReserved = errors.New("minimal: not a member that left")
)

// Defaults of Config.
const (
	// DefaultTolerance is τ: 10 % of the mean share, the figure the issue proposed. With it a join
	// takes pieces from about 1/τ = 10 members, which is what sets DefaultMaxRanges.
	DefaultTolerance = 0.10
	// DefaultMaxRanges is k. A join from a settled ring gives the newcomer at most about 1/τ + 2
	// pieces and a leave gives each receiver at most one new range per piece of the leaver, so 16
	// leaves room for a few changes in a row before the idle merges run.
	DefaultMaxRanges = 16
	// DefaultReturnDelay is one default lease TTL: a crashed worker's tokens wait that long for
	// its lease to expire anyway, so a graceful leave waiting as long costs no more than a crash,
	// and a rolling restart whose worker is back within it moves nothing.
	DefaultReturnDelay = 10 * time.Second
	// DefaultStepMoves is the churn budget of one even-out step, in moves (one move is one range
	// handed from one member to another: one handover, one re-scan).
	DefaultStepMoves = 8
	// DefaultIdle is how long a ring stays settled before an even-out step, and so the spacing
	// of the steps: with DefaultStepMoves, at most about 8 moves per 10 s, 48 a minute. Ten
	// seconds is one default lease TTL: a ring that saw a change in that time is not idle.
	DefaultIdle = 10 * time.Second
)

// Config are the stated parameters of the assignment: a per-ring setting, the same on every
// coordinator (two leaders with different settings would undo each other's plans). The zero
// value of each field means its default.
type Config struct {
	// Tolerance is τ: right after a change every active member's share lies within τ of the mean
	// (see the package doc for the exact bounds and when they hold). From 0 to 0.5.
	Tolerance float64
	// MaxRanges is k, the most ranges a member ever holds. At least JoinPieces (⌈1/τ⌉+2).
	MaxRanges int
	// MergeAbove is the range count above which the even-out step merges a member's smallest
	// ranges into its neighbours'. Default MaxRanges/2: a settled ring keeps half of k free for
	// the pieces the next changes bring. From 1 to MaxRanges.
	MergeAbove int
	// ReturnDelay is how long a member that left keeps its ranges reserved for a new incarnation
	// of its id. Negative means no delay: a leave hands its ranges on at once.
	ReturnDelay time.Duration
	// StepMoves is the churn budget of one even-out step in moves. At least 1.
	StepMoves int
	// Idle is how long a ring must stay settled (no change, nothing reserved, no step in
	// flight) before an even-out step: the steps' spacing. StepMoves per Idle is the churn
	// budget of the even-out. The planner keeps no clock; the coordinator's leader waits it.
	Idle time.Duration
}

// WithDefaults fills zero fields with the defaults.
func (c Config) WithDefaults() Config {
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.MaxRanges == 0 {
		c.MaxRanges = DefaultMaxRanges
	}
	if c.MergeAbove == 0 {
		c.MergeAbove = max(1, c.MaxRanges/2)
	}
	if c.ReturnDelay == 0 {
		c.ReturnDelay = DefaultReturnDelay
	}
	if c.StepMoves == 0 {
		c.StepMoves = DefaultStepMoves
	}
	if c.Idle == 0 {
		c.Idle = DefaultIdle
	}
	return c
}

// Validate refuses parameters the bounds of the package doc do not hold for.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case !(c.Tolerance > 0 && c.Tolerance <= 0.5): // written so that NaN is refused too
		return fmt.Errorf("%w: tolerance %v is not in (0, 0.5]", ErrConfig, c.Tolerance)
	case c.MaxRanges < c.JoinPieces():
		return fmt.Errorf("%w: max ranges %d is below ⌈1/τ⌉+2 = %d, the pieces a join may take", ErrConfig, c.MaxRanges, c.JoinPieces())
	case c.MergeAbove < 1 || c.MergeAbove > c.MaxRanges:
		return fmt.Errorf("%w: merge above %d is not in [1, max ranges %d]", ErrConfig, c.MergeAbove, c.MaxRanges)
	case c.StepMoves < 1:
		return fmt.Errorf("%w: step moves %d is below 1", ErrConfig, c.StepMoves)
	case c.Idle < 0:
		return fmt.Errorf("%w: idle %v is negative", ErrConfig, c.Idle)
	}
	return nil
}

// JoinPieces is ⌈1/τ⌉+2, about the pieces a join from a settled ring gives the newcomer: one per
// donor, each donor giving down to the lower bound, that is about τ+1/N of the mean (see the
// package doc), so about 1/τ donors make up the newcomer's 1/(N+1).
func (c Config) JoinPieces() int {
	c = c.WithDefaults()
	return int(math.Ceil(1/c.Tolerance)) + 2
}
