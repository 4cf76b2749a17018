package fsm

import "fmt"

// Validate refuses a timing no leader runs: lease.Timing.Validate, and a positive TTL.
func (t LeaseTiming) Validate() error {
	if t.TTL <= 0 || t.Renewal <= 0 || t.Drift <= 0 || t.Margin < 0 {
		return fmt.Errorf("%w: lease timing %+v is not a timing with its defaults filled", ErrMalformed, t)
	}
	if err := t.Lease().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

func (s *State) applyCommitTiming(c *CommitTiming) error {
	if err := c.Timing.Validate(); err != nil {
		return err
	}
	if s.Timing == nil {
		s.Timing = &TimingState{InForce: c.Timing, Longest: c.Timing}
		return nil
	}
	s.Timing.InForce = c.Timing
	if c.Timing.HolderBound() > s.Timing.Longest.HolderBound() {
		s.Timing.Longest = c.Timing
	}
	return nil
}

func (s *State) applyRetireTiming(c *RetireTiming) error {
	if err := c.Keep.Validate(); err != nil {
		return err
	}
	if s.Timing == nil || s.Timing.Longest != c.Retire || s.Timing.InForce != c.Keep {
		return nil // decided on an older state: another leader committed its timing since
	}
	s.Timing.Longest = c.Keep
	return nil
}
