package leaseclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

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

	// pause runs before every connection attempt, the first included: it waits d, the delay the
	// dialPlan chose before dialing addr, and returns false if ctx ended or Leave was called.
	// Tests replace it (before Run) to record the plan's choices without waiting.
	pause func(ctx context.Context, addr string, d time.Duration) bool
	// random is the dialPlan's source: the first address and every jittered delay. Only Run uses
	// it. Tests replace it (before Run) to script the draws.
	random randomSource
}

// randomSource is what the dialPlan draws from; *rand.Rand of math/rand/v2 is one.
type randomSource interface {
	// IntN returns a uniform draw from [0, n).
	IntN(n int) int
	// Float64 returns a uniform draw from [0, 1).
	Float64() float64
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
	guard := cfg.Guard
	if guard == nil {
		guard = lease.NewGuard(cfg.Clock, cfg.GuardMargin)
	}
	c := &Client{
		cfg: cfg,
		log: cfg.Logger.With().Str("component", "leaseclient").Str("worker_id", cfg.WorkerID).
			Str("incarnation", cfg.Incarnation).Stringer("ring", cfg.Ring).Logger(),
		guard:   guard,
		routes:  routes,
		runDone: make(chan struct{}),
		stop:    make(chan struct{}),
	}
	c.random = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	c.pause = func(ctx context.Context, _ string, d time.Duration) bool { return c.sleep(ctx, d) }
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
