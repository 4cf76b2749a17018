package worker

import (
	"context"
	"errors"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/wallclock"
)

// Run cycles until ctx ends: a cycle right after one that made progress, otherwise after
// IdleBackoff. While the guard refuses (no lease yet, or it expired) it keeps trying every
// IdleBackoff; it never gives up on its own. While Config.ClockCheck says the clock is untrusted
// it starts no cycle (the clock monitor logs why, once per change). When ctx ends it stops dispatching rows, lets the
// rows under way finish (each bounded by its timeouts), keeps every bucket it did not finish,
// and returns nil.
func (s *Scanner) Run(ctx context.Context) error {
	s.log.Info().Str("region", s.cfg.Region).Str("cluster", s.cfg.Cluster).Str("service", s.cfg.Service).
		Int("window_minutes", s.cfg.WindowMinutes).Int("concurrency", s.cfg.Concurrency).Msg("worker running")
	for ctx.Err() == nil {
		if s.clockTrusted() && s.cycleOnce(ctx) {
			continue
		}
		wallclock.Sleep(ctx, s.cfg.IdleBackoff)
	}
	s.log.Info().Msg("worker stopped")
	return nil
}

// cycleOnce runs a cycle, logs how it ended, and reports whether another should follow at once.
func (s *Scanner) cycleOnce(ctx context.Context) bool {
	res, err := s.Cycle(ctx)
	switch {
	case ctx.Err() != nil:
		return false // a stop, not a failure: the work it left is kept
	case err == nil:
		s.cycleEnded(nil)
		return res.Progress()
	case lease.IsGuardError(err):
		s.log.Debug().Err(err).Msg("cycle stopped by the guard")
	case errors.Is(err, ErrStopped):
	default:
		s.log.Warn().Err(err).Msg("cycle failed")
		s.cycleEnded(err)
	}
	return false
}

// cycleEnded tells Config.CycleEnded, if set, how a cycle ended.
func (s *Scanner) cycleEnded(err error) {
	if s.cfg.CycleEnded != nil {
		s.cfg.CycleEnded(err)
	}
}

// clockTrusted reports whether the worker may work on its clock now.
func (s *Scanner) clockTrusted() bool {
	return s.cfg.ClockCheck == nil || s.cfg.ClockCheck.Status().Trusted
}
