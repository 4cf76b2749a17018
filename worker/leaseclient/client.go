package leaseclient

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Client holds one worker's lease of one ring. Its methods are safe for concurrent use.
type Client struct {
	cfg      Config
	log      zerolog.Logger
	guard    *lease.Guard
	routes   map[string][]byte
	rel      *releaser
	rep      *reporter
	drainMu  sync.Mutex // Drain calls never overlap
	started  atomic.Bool
	runDone  chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	stats    counters
	mu       sync.Mutex // guards sess and leaving, and orders Guard updates against Leave
	sess     *session
	leaving  bool
}

type counters struct {
	connects, reconnects, redirects, elements, releases, reports atomic.Uint64
}

// Stats are running totals since New.
type Stats struct {
	// Connects counts connections opened (SETUP sent).
	Connects uint64
	// Reconnects counts connection attempts after the first, for any reason (failure or redirect).
	Reconnects uint64
	// Redirects counts not_leader answers followed to the named leader.
	Redirects uint64
	// Elements counts lease elements installed in the Guard.
	Elements uint64
	// Releases counts acknowledged ring.release requests.
	Releases uint64
	// Reports counts acknowledged ring.report requests.
	Reports uint64
}

// New checks cfg, fills its defaults and draws the incarnation if cfg has none.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Coordinators = append([]string(nil), cfg.Coordinators...)
	if cfg.Incarnation == "" {
		inc, err := newIncarnation()
		if err != nil {
			return nil, err
		}
		cfg.Incarnation = inc
	}
	routes := make(map[string][]byte)
	for _, r := range []string{lease.RouteLeases, lease.RouteRelease, lease.RouteLeave, lease.RouteView, lease.RouteReport} {
		md, err := routingMetadata(r)
		if err != nil {
			return nil, err
		}
		routes[r] = md
	}
	c := &Client{
		cfg: cfg,
		log: cfg.Logger.With().Str("component", "leaseclient").Str("worker_id", cfg.WorkerID).
			Str("incarnation", cfg.Incarnation).Stringer("ring", cfg.Ring).Logger(),
		guard:   lease.NewGuard(cfg.Clock, cfg.GuardMargin),
		routes:  routes,
		runDone: make(chan struct{}),
		stop:    make(chan struct{}),
	}
	c.rel = newReleaser(c)
	c.rep = newReporter(c)
	return c, nil
}

// Guard is the TimeWindowGuard holding this worker's lease; the data plane asks it before every
// CQL query and every execution.
func (c *Client) Guard() *lease.Guard { return c.guard }

// Current returns the lease held, if any, valid or not.
func (c *Client) Current() (lease.Lease, bool) { return c.guard.Current() }

// Incarnation is this process's incarnation, the same across reconnects.
func (c *Client) Incarnation() string { return c.cfg.Incarnation }

// Stats returns the running totals.
func (c *Client) Stats() Stats {
	return Stats{
		Connects:   c.stats.connects.Load(),
		Reconnects: c.stats.reconnects.Load(),
		Redirects:  c.stats.redirects.Load(),
		Elements:   c.stats.elements.Load(),
		Releases:   c.stats.releases.Load(),
		Reports:    c.stats.reports.Load(),
	}
}

// installOutcome says what install did with an element.
type installOutcome int

const (
	installed installOutcome = iota
	installStale
	installRefusedLeaving
)

// install puts l in the Guard unless the client is leaving or l is older than the lease held.
func (c *Client) install(l lease.Lease) (prev lease.Lease, hadPrev bool, outcome installOutcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leaving {
		return lease.Lease{}, false, installRefusedLeaving
	}
	prev, hadPrev = c.guard.Current()
	if hadPrev && l.Epoch < prev.Epoch {
		return prev, hadPrev, installStale
	}
	c.guard.Set(l)
	return prev, hadPrev, installed
}

func (c *Client) setSession(s *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leaving {
		return false
	}
	c.sess = s
	return true
}

func (c *Client) clearSession(s *session) {
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
	}
	c.mu.Unlock()
}

func (c *Client) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

func (c *Client) isLeaving() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaving
}

// drain calls the Drain hook, one call at a time; a panic counts as an error.
func (c *Client) drain(ctx context.Context, old, new lease.Lease) (err error) {
	if c.cfg.Drain == nil {
		return nil
	}
	c.drainMu.Lock()
	defer c.drainMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Interface("panic", r).Msg("panic in Drain")
			err = fmt.Errorf("leaseclient: panic in Drain: %v", r)
		}
	}()
	return c.cfg.Drain(ctx, old, new)
}

// onLease calls the OnLease hook; a panic is logged and forgotten.
func (c *Client) onLease(l lease.Lease) {
	if c.cfg.OnLease == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Interface("panic", r).Msg("panic in OnLease")
		}
	}()
	c.cfg.OnLease(l)
}
