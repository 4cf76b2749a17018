package worker

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// LeaseFit says whether the query and execution timeouts, each plus the guard's margin, fit in
// the least validity of the lease in force (TTL − 2 × renewal of its element, not any flag's): ""
// when they do, or when no element said its renewal period (a coordinator that predates
// renewal_ms); else why not, naming the figures and the flags to change. When they do not fit,
// the guard refuses those operations for part of every renewal period (docs/protocol.md section
// 5.6): the worker is not ready. The first time it finds so, and again whenever the figures
// change, it logs an error.
func (s *Scanner) LeaseFit() string {
	l, ok := s.guard.Current()
	if !ok {
		return ""
	}
	why := leaseFit(s.cfg.QueryTimeout, s.cfg.ExecTimeout, s.guard.Margin(), l)
	s.fit.observe(why, l, s.log)
	return why
}

// leaseFit is LeaseFit for lease l.
func leaseFit(query, exec, margin time.Duration, l lease.Lease) string {
	if l.Renewal <= 0 {
		return ""
	}
	least := l.TTL - 2*l.Renewal // not LeastValidity: a renewal past half the TTL leaves nothing
	type timeout struct {
		flag string
		d    time.Duration
	}
	var over []timeout
	for _, t := range []timeout{{"--exec-timeout", exec}, {"--query-timeout", query}} {
		if t.d+margin > least {
			over = append(over, t)
		}
	}
	if len(over) == 0 {
		return ""
	}
	figures, flags := make([]string, len(over)), make([]string, len(over))
	for i, t := range over {
		figures[i], flags[i] = t.flag+" "+t.d.String(), t.flag
	}
	what := fmt.Sprintf("%s + %v margin does", figures[0], margin)
	if len(over) > 1 {
		what = fmt.Sprintf("%s, each + %v margin, do", strings.Join(figures, " and "), margin)
	}
	return fmt.Sprintf("%s not fit in the %v a lease holds at least (ttl %v − 2 × renewal %v): lower %s or raise the coordinators' --lease-ttl",
		what, max(least, 0), l.TTL, l.Renewal, strings.Join(flags, " and "))
}

// fitLog says when the fit changes: an error once per new set of figures that does not fit, a
// line when they fit again. A /readyz or a scrape asks every few seconds and must not repeat it.
type fitLog struct {
	mu   sync.Mutex
	last string
}

func (f *fitLog) observe(why string, l lease.Lease, log zerolog.Logger) {
	f.mu.Lock()
	changed := why != f.last
	was := f.last
	f.last = why
	f.mu.Unlock()
	switch {
	case !changed:
	case why != "":
		log.Error().Int64("ttl_ms", l.TTL.Milliseconds()).Int64("renewal_ms", l.Renewal.Milliseconds()).
			Int64("least_validity_ms", (l.TTL-2*l.Renewal).Milliseconds()).Str("reason", why).
			Msg("the worker's timeouts do not fit its lease: " + why)
	case was != "":
		log.Info().Int64("ttl_ms", l.TTL.Milliseconds()).Int64("renewal_ms", l.Renewal.Milliseconds()).
			Msg("the worker's timeouts fit its lease again")
	}
}
