package clockcheck

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Defaults of Config. A zero field means its default.
const (
	// DefaultMaxClockOffset is the bound between any two processes' clocks (product.md).
	DefaultMaxClockOffset = 2 * time.Second
	// DefaultEvery is the period between two measurements: a drifting clock (tens of ppm) moves
	// microseconds in it, a stepped one is caught within it.
	DefaultEvery = 30 * time.Second
	// DefaultStaleAfterPeriods is how many periods an estimate is trusted for: two measurements may
	// fail in a row (a busy Cassandra) before the clock is untrusted for want of one.
	DefaultStaleAfterPeriods = 3
	// DefaultProbeTimeout bounds one measurement.
	DefaultProbeTimeout = 5 * time.Second
)

// Prober takes samples of the servers' clocks, reading the local clock around each query.
type Prober interface {
	Probe(ctx context.Context) ([]Sample, error)
}

// Config configures a Monitor. Zero values mean the documented defaults.
type Config struct {
	// Prober takes the samples. Required.
	Prober Prober
	// Clock is the process's clock, the one whose offset is measured. Default lease.SystemClock.
	Clock lease.Clock
	// MaxClockOffset bounds the offset between any two processes; each may be half of it from
	// Cassandra. Default DefaultMaxClockOffset.
	MaxClockOffset time.Duration
	// Every is the period of Run's measurements. Default DefaultEvery.
	Every time.Duration
	// StaleAfter is the age past which an estimate is no estimate. Default DefaultStaleAfterPeriods × Every.
	StaleAfter time.Duration
	// ProbeTimeout bounds one measurement. Default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// OnChange, if set, is called with the new verdict each time the clock turns trusted or
	// untrusted, the first verdict included. Calls never overlap.
	OnChange func(Status)
	// Logger receives a line per change of verdict and per failed measurement.
	Logger zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	if c.Every == 0 {
		c.Every = DefaultEvery
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfterPeriods * c.Every
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	return c
}

// Validate reports the first problem of c (after defaults), wrapped in ErrConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Prober == nil:
		return fmt.Errorf("%w: a prober is required", ErrConfig)
	case c.MaxClockOffset < 0:
		return fmt.Errorf("%w: max clock offset %v is negative", ErrConfig, c.MaxClockOffset)
	case c.Every < 0 || c.StaleAfter < c.Every:
		return fmt.Errorf("%w: period %v must be positive and at most the staleness limit %v", ErrConfig, c.Every, c.StaleAfter)
	case c.ProbeTimeout < 0:
		return fmt.Errorf("%w: probe timeout %v is negative", ErrConfig, c.ProbeTimeout)
	}
	return nil
}

// Monitor keeps a process's latest clock estimate and its verdict. Safe for concurrent use.
type Monitor struct {
	cfg Config
	log zerolog.Logger

	notifyMu sync.Mutex // orders OnChange calls and the verdict they report
	reported *bool      // the last verdict given to OnChange; nil before the first

	// remeasure wakes Run for a measurement now: Status saw the wall clock stepped.
	remeasure chan struct{}

	mu       sync.Mutex
	est      Estimate
	measured bool
	failures uint64
	// hostsApart: the last estimate's hosts were further apart than the limit (logged on change).
	hostsApart bool
	// askedFor is the At of the estimate a step was last seen on: Status asks Run once per
	// estimate, so a measurement that fails is not retried back to back.
	askedFor time.Time
}

// NewMonitor checks cfg and returns a Monitor with no estimate yet (untrusted).
func NewMonitor(cfg Config) (*Monitor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Monitor{cfg: cfg, log: cfg.Logger.With().Str("component", "clockcheck").Logger(),
		remeasure: make(chan struct{}, 1)}, nil
}

// MaxClockOffset is the bound the monitor checks against (each process gets half of it).
func (m *Monitor) MaxClockOffset() time.Duration { return m.cfg.MaxClockOffset }

// Status is the verdict now, by the process's clock. When it finds the wall clock stepped since
// the last measurement, it asks Run to measure again at once (once per estimate).
func (m *Monitor) Status() Status {
	m.mu.Lock()
	e, ok := m.est, m.measured
	m.mu.Unlock()
	s := Check(e, ok, m.cfg.Clock.Now(), m.cfg.MaxClockOffset, m.cfg.StaleAfter)
	if s.Stepped {
		m.mu.Lock()
		ask := !m.askedFor.Equal(e.At)
		m.askedFor = e.At
		m.mu.Unlock()
		if ask {
			select {
			case m.remeasure <- struct{}{}:
			default: // already asked
			}
		}
	}
	return s
}

// Failures counts measurements that produced no estimate.
func (m *Monitor) Failures() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failures
}

// Measure takes one measurement now and keeps it; a failed one keeps the previous estimate, which
// turns stale in time. Either way the verdict is re-judged, and OnChange told if it changed.
func (m *Monitor) Measure(ctx context.Context) error {
	// Read before the first query: a step during the measurement then shows in Check.
	at := m.cfg.Clock.Now()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ProbeTimeout)
	samples, err := m.cfg.Prober.Probe(ctx)
	cancel()
	var e Estimate
	if err == nil {
		e, err = EstimateFrom(samples, at)
	}
	limit := m.cfg.MaxClockOffset / 2
	apart := err == nil && e.Spread > limit
	m.mu.Lock()
	wasApart := m.hostsApart
	if err == nil {
		m.est, m.measured, m.hostsApart = e, true, apart
	} else {
		m.failures++
	}
	m.mu.Unlock()
	switch {
	case err != nil:
		m.log.Warn().Err(err).Msg("clock offset measurement failed; the last estimate is kept until it is stale")
	case apart && !wasApart:
		m.log.Warn().Dur("spread", e.Spread).Dur("limit", limit).Int("hosts", e.Hosts).Msg(
			"Cassandra's hosts disagree on the time by more than max_clock_offset / 2: processes judged against different hosts may be further apart than max_clock_offset; fix the hosts' time sync")
	case !apart && wasApart:
		m.log.Info().Dur("spread", e.Spread).Dur("limit", limit).Int("hosts", e.Hosts).Msg("Cassandra's hosts agree on the time again")
	}
	m.judge()
	return err
}

// judge tells OnChange and the log when the verdict changed.
func (m *Monitor) judge() {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	s := m.Status()
	if m.reported != nil && *m.reported == s.Trusted {
		return
	}
	m.reported = &s.Trusted
	ev := m.log.Info()
	if !s.Trusted {
		ev = m.log.Warn().Str("reason", s.Reason)
	}
	if s.Measured {
		ev = ev.Float64("offset_s", s.Estimate.Offset.Seconds()).Float64("uncertainty_s", s.Estimate.Uncertainty.Seconds()).
			Str("cassandra_host", s.Estimate.Host)
	}
	ev.Dur("limit", s.Limit).Bool("trusted", s.Trusted).Msg(map[bool]string{
		true:  "clock trusted: its offset from Cassandra is within half of max_clock_offset",
		false: "clock untrusted: no work that depends on it until it is back within the bound",
	}[s.Trusted])
	if m.cfg.OnChange != nil {
		m.cfg.OnChange(s)
	}
}

// Run measures every Config.Every, and at once when Status saw the wall clock stepped, until ctx
// ends; it returns ctx's error. Call Measure first when the process must not work before its
// clock is judged.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTimer(m.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-m.remeasure:
			t.Stop()
		}
		_ = m.Measure(ctx) // a failure is logged; the estimate ages
		t.Reset(m.cfg.Every)
	}
}
