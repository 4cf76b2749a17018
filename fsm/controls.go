package fsm

import (
	"fmt"
	"math"
	"slices"

	"github.com/retryring/retryring/lease"
)

// Bounds of a ring's controls: an operator's commands are committed to the Raft log and kept in
// every coordinator's state and every lease element, so they must not grow without bound.
const (
	// MaxPausedImpls is the most impl types one ring may have paused at once.
	MaxPausedImpls = 64
	// MaxImplBytes bounds an impl type's name (stacksaga_impl_type).
	MaxImplBytes = 128
	// MaxReasonBytes bounds a pause's reason.
	MaxReasonBytes = 256
)

// Validate refuses a pause that names no ring, an empty or too long impl type, more impl types
// than MaxPausedImpls or a reason longer than MaxReasonBytes.
func (c Pause) Validate() error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	if len(c.Reason) > MaxReasonBytes {
		return fmt.Errorf("%w: reason longer than %d bytes", ErrMalformed, MaxReasonBytes)
	}
	return validateImpls(c.Impl)
}

// Validate refuses a resume that names no ring or a malformed impl type.
func (c Resume) Validate() error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	return validateImpls(c.Impl)
}

// Validate refuses a limit that names no ring, or is neither a rate above 0 (finite) nor a clear.
func (c Limit) Validate() error {
	if err := validateRing(c.Ring); err != nil {
		return err
	}
	switch {
	case c.Clear && c.PerSecond != 0:
		return fmt.Errorf("%w: a limit either sets a rate or clears it, not both", ErrMalformed)
	case c.Clear:
		return nil
	case !(c.PerSecond > 0) || math.IsInf(c.PerSecond, 1): // written so that NaN is refused too
		return fmt.Errorf("%w: the rate limit must be a number of executions per second above 0, got %v", ErrMalformed, c.PerSecond)
	}
	return nil
}

func validateRing(k lease.RingKey) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

func validateImpls(impls []string) error {
	if len(impls) > MaxPausedImpls {
		return fmt.Errorf("%w: %d impl types, at most %d per ring", ErrMalformed, len(impls), MaxPausedImpls)
	}
	for _, impl := range impls {
		if impl == "" || len(impl) > MaxImplBytes {
			return fmt.Errorf("%w: impl type %q: 1 to %d bytes", ErrMalformed, impl, MaxImplBytes)
		}
	}
	return nil
}

func (s *State) applyPause(c *Pause) error {
	if err := c.Validate(); err != nil {
		return err
	}
	ctl := s.controlsOf(c.Ring)
	if len(c.Impl) == 0 {
		ctl.Paused = true
	} else {
		ctl.PausedImpl = sortedSet(append(ctl.PausedImpl, c.Impl...))
		if len(ctl.PausedImpl) > MaxPausedImpls {
			return fmt.Errorf("%w: the ring would have %d impl types paused, at most %d", ErrMalformed, len(ctl.PausedImpl), MaxPausedImpls)
		}
	}
	if c.Reason != "" {
		ctl.Reason = c.Reason // a pause without one keeps the reason of the pause before
	}
	s.setControls(c.Ring, ctl, c.AtMs)
	return nil
}

func (s *State) applyResume(c *Resume) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if r := s.Ring(c.Ring); r == nil || r.Controls == nil {
		return nil
	}
	ctl := s.controlsOf(c.Ring)
	if len(c.Impl) == 0 {
		ctl.Paused, ctl.PausedImpl = false, nil
	} else {
		ctl.PausedImpl = slices.DeleteFunc(ctl.PausedImpl, func(impl string) bool { return slices.Contains(c.Impl, impl) })
	}
	if !ctl.Paused && len(ctl.PausedImpl) == 0 {
		ctl.Reason = ""
	}
	s.setControls(c.Ring, ctl, c.AtMs)
	return nil
}

func (s *State) applyLimit(c *Limit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	ctl := s.controlsOf(c.Ring)
	ctl.RatePerS = c.PerSecond
	s.setControls(c.Ring, ctl, c.AtMs)
	return nil
}

// controlsOf returns a copy of the ring's controls, zero when it has none.
func (s *State) controlsOf(k lease.RingKey) Controls {
	if r := s.Ring(k); r != nil && r.Controls != nil {
		return *r.Controls.clone()
	}
	return Controls{}
}

// setControls installs ctl as the ring's controls, creating the ring if needed (an operator may
// pause a ring before its first worker joins). SinceMs moves only when something changed, so
// that applying a command twice changes nothing the second time. A ring left with no controls
// that no worker ever joined is forgotten again: it was only a name an operator typed.
func (s *State) setControls(k lease.RingKey, ctl Controls, atMs int64) {
	r := s.Ring(k)
	if ctl.PausedImpl != nil && len(ctl.PausedImpl) == 0 {
		ctl.PausedImpl = nil
	}
	empty := !ctl.Paused && ctl.PausedImpl == nil && ctl.RatePerS == 0
	if r == nil && empty {
		return
	}
	if r == nil {
		r = s.ringFor(k)
	}
	old := r.Controls
	if old != nil {
		ctl.SinceMs = old.SinceMs
	}
	if old == nil || !old.equal(ctl) {
		ctl.SinceMs = atMs
	}
	switch {
	case !empty:
		r.Controls = &ctl
	case r.NextSeq == 0 && len(r.Members) == 0:
		delete(s.Rings, RingID(k))
	default:
		r.Controls = nil
	}
}

// equal compares what the workers obey and the reason, not SinceMs.
func (c *Controls) equal(o Controls) bool {
	return c.Paused == o.Paused && slices.Equal(c.PausedImpl, o.PausedImpl) && c.Reason == o.Reason && c.RatePerS == o.RatePerS
}

func sortedSet(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
