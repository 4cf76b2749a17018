package worker

import (
	"slices"
	"sync"
	"time"

	"github.com/retryring/retryring/lease"
)

// controls are the flow controls of the lease in force (product.md, "Operating retries"): nil
// without a lease or from a coordinator that sends none. Their rate goes to the throttle, and a
// change is logged once, so that a person sees when the worker took up a pause, a resume or a
// new rate.
func (s *Scanner) controls() *lease.Controls {
	l, ok := s.guard.Current()
	if !ok {
		return nil
	}
	s.throttle.apply(l.Controls, phaseOf(l), time.Now())
	s.ctlLog.observe(s, l.Controls)
	return l.Controls
}

// controlsLog remembers the controls last seen, to log their changes.
type controlsLog struct {
	mu   sync.Mutex
	last lease.Controls
}

func (c *controlsLog) observe(s *Scanner, ctl *lease.Controls) {
	var now lease.Controls
	if ctl != nil {
		now = *ctl
	}
	c.mu.Lock()
	was := c.last
	c.last = now
	c.mu.Unlock()
	if now.Paused != was.Paused {
		if now.Paused {
			s.log.Warn().Dur("pause_sweep_every", s.cfg.PauseSweepEvery).Msg("ring paused by the operator: no execution starts until it is resumed, and no traversal but a sweep of kept buckets' markers every pause_sweep_every")
		} else {
			s.log.Info().Msg("ring resumed by the operator")
		}
	}
	if !slices.Equal(now.PausedImpl, was.PausedImpl) {
		s.log.Info().Strs("paused_impl", now.PausedImpl).Msg("impl types whose executions the operator paused")
	}
	if rate := now.RatePerS; (rate == nil) != (was.RatePerS == nil) || rate != nil && *rate != *was.RatePerS {
		ev := s.log.Info().Float64("max_rate", s.cfg.MaxRate)
		if rate != nil {
			ev = ev.Float64("rate_per_s", *rate)
		}
		ev.Float64("limit_per_s", s.throttle.limit()).Msg("execution rate: this worker's share of the ring's limit (none: null), capped by --max-rate")
	}
}
