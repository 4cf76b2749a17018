package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker/leaseclient"
)

// Defaults of Config.
const (
	// DefaultWorkersPerRing sets the ring count when Config.Rings is 0: Workers / 10, at least one.
	DefaultWorkersPerRing = 10
	// DefaultRegion and DefaultCluster name the swarm's rings; each ring's service is s001, s002, ...
	DefaultRegion  = "swarm"
	DefaultCluster = "c1"
	// DefaultStopWait bounds Close's wait for the members' Run to return.
	DefaultStopWait = 15 * time.Second
)

// Errors of the package.
var (
	// ErrInvalidConfig means Config.Validate refused the configuration.
	ErrInvalidConfig = errors.New("swarm: invalid config")
	// ErrStuck means a member's Run did not return within the stop bound after Close cancelled it.
	ErrStuck = errors.New("swarm: a lease client did not stop")
	// ErrStarted means Start was called a second time.
	ErrStarted = errors.New("swarm: already started")
)

// Config configures a Swarm. Zero values mean the defaults.
type Config struct {
	// Workers is the number of lease clients. Required, at least 1.
	Workers int
	// Rings is the number of rings; worker i joins ring i mod Rings. Default Workers / 10, at least 1.
	Rings int
	// Region and Cluster of every ring. Defaults DefaultRegion and DefaultCluster.
	Region, Cluster string
	// Coordinators are the RSocket addresses every client is given. Required.
	Coordinators []string
	// LogWriter, if set, receives every log line of every client (JSON, one per line) besides the
	// swarm's own counting of them; the clients write from many goroutines, one line per Write
	// (an *os.File will do).
	LogWriter io.Writer
	// Client, if set, adjusts each client's configuration before it is created (backoff, keepalive).
	// It must not replace OnElement: that is how the swarm records.
	Client func(*leaseclient.Config)
	// StopWait bounds Close. Default DefaultStopWait.
	StopWait time.Duration
}

func (c Config) withDefaults() Config {
	if c.Rings == 0 {
		c.Rings = max(1, c.Workers/DefaultWorkersPerRing)
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.StopWait == 0 {
		c.StopWait = DefaultStopWait
	}
	return c
}

// Validate reports the first problem of c, wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Workers < 1:
		return fmt.Errorf("%w: %d workers, want at least 1", ErrInvalidConfig, c.Workers)
	case c.Rings < 1 || c.Rings > c.Workers:
		return fmt.Errorf("%w: %d rings for %d workers, want 1 to %d", ErrInvalidConfig, c.Rings, c.Workers, c.Workers)
	case len(c.Coordinators) == 0:
		return fmt.Errorf("%w: no coordinator address", ErrInvalidConfig)
	case c.StopWait < 0:
		return fmt.Errorf("%w: negative stop wait %v", ErrInvalidConfig, c.StopWait)
	}
	return nil
}

// Member is one lease client of the swarm.
type Member struct {
	Index  int
	ID     string
	Ring   lease.RingKey
	client *leaseclient.Client

	mu       sync.Mutex
	installs []Install
	stopped  time.Time
	runErr   error
	done     chan struct{}
}

// Client is the member's lease client.
func (m *Member) Client() *leaseclient.Client { return m.client }

// RunErr is what the client's Run returned (nil while it runs, and after Close: Run returns nil
// or the cancelled context's error then).
func (m *Member) RunErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runErr
}

func (m *Member) record(e leaseclient.Element) {
	in := Install{
		At: e.Received, End: e.Lease.ExpiresAt(), ValidFrom: e.Lease.ValidFrom,
		Epoch: e.Lease.Epoch, Generation: e.Lease.Generation, NodeIndex: e.Lease.NodeIndex, NodeCount: e.Lease.NodeCount,
		Ranges: e.Lease.Ranges, Coordinator: e.Coordinator,
	}
	m.mu.Lock()
	m.installs = append(m.installs, in)
	m.mu.Unlock()
}

// Swarm is many real lease clients (worker/leaseclient, one RSocket connection each) in this
// process, spread over several rings, with the record of every lease element each one installed.
type Swarm struct {
	cfg     Config
	rings   []lease.RingKey
	members []*Member
	logs    *logCounter

	startMu   sync.Mutex // orders Start and Close
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// New creates the clients (nothing connects yet); Start runs them.
func New(cfg Config) (*Swarm, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Swarm{cfg: cfg, logs: newLogCounter(cfg.LogWriter)}
	for r := range cfg.Rings {
		s.rings = append(s.rings, lease.RingKey{Region: cfg.Region, Cluster: cfg.Cluster, Service: fmt.Sprintf("s%03d", r+1)})
	}
	log := zerolog.New(s.logs).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	for i := range cfg.Workers {
		m := &Member{Index: i, ID: fmt.Sprintf("w%04d", i+1), Ring: s.rings[i%cfg.Rings], done: make(chan struct{})}
		lc := leaseclient.Config{WorkerID: m.ID, Ring: m.Ring, Coordinators: cfg.Coordinators, Logger: log}
		if cfg.Client != nil {
			cfg.Client(&lc)
		}
		lc.OnElement = m.record
		c, err := leaseclient.New(lc)
		if err != nil {
			return nil, fmt.Errorf("swarm: member %s: %w", m.ID, err)
		}
		m.client = c
		s.members = append(s.members, m)
	}
	return s, nil
}

// Start runs every client at once (a join storm); they run until Close or until ctx ends. It can
// be called once.
func (s *Swarm) Start(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if s.cancel != nil {
		return ErrStarted
	}
	ctx, s.cancel = context.WithCancel(ctx)
	for _, m := range s.members {
		go func() {
			defer close(m.done)
			err := m.client.Run(ctx)
			m.mu.Lock()
			m.runErr = err
			if m.stopped.IsZero() {
				m.stopped = time.Now()
			}
			m.mu.Unlock()
		}()
	}
	return nil
}

// Close stops every client (as a crash would: no ring.leave, so that the coordinators see what a
// fleet dying at once looks like) and waits, at most Config.StopWait, for each Run to return.
func (s *Swarm) Close() error {
	s.closeOnce.Do(func() {
		s.startMu.Lock()
		defer s.startMu.Unlock()
		now := time.Now()
		for _, m := range s.members {
			m.mu.Lock()
			if m.stopped.IsZero() {
				m.stopped = now
			}
			m.mu.Unlock()
		}
		if s.cancel == nil {
			return
		}
		s.cancel()
		deadline := time.After(s.cfg.StopWait)
		for _, m := range s.members {
			select {
			case <-m.done:
			case <-deadline:
				s.closeErr = fmt.Errorf("%w: %s within %v", ErrStuck, m.ID, s.cfg.StopWait)
				return
			}
		}
	})
	return s.closeErr
}

// Members are the swarm's members, in index order.
func (s *Swarm) Members() []*Member { return s.members }

// Rings are the swarm's rings, in order.
func (s *Swarm) Rings() []lease.RingKey { return s.rings }

// History copies the record of every member.
func (s *Swarm) History() History {
	h := History{Members: make([]MemberHistory, len(s.members))}
	for i, m := range s.members {
		m.mu.Lock()
		h.Members[i] = MemberHistory{
			ID: m.ID, Incarnation: m.client.Incarnation(), Ring: m.Ring, Stopped: m.stopped,
			Installs: append([]Install(nil), m.installs...),
		}
		m.mu.Unlock()
	}
	return h
}

// Counters are running totals over the whole swarm: the clients' own Stats, and what their logs
// say about failed sessions and redirects, by coordinator address.
type Counters struct {
	leaseclient.Stats
	// SessionsEnded counts connections that ended without Leave (refused, redirected, dropped), by
	// the address the client had dialled.
	SessionsEnded map[string]uint64
	// RedirectsTo counts not_leader redirects followed, by the leader address they named.
	RedirectsTo map[string]uint64
	// NoLeader counts sessions that ended with a no_leader answer.
	NoLeader uint64
}

// Counters sums the clients' stats and reads the log counts.
func (s *Swarm) Counters() Counters {
	var c Counters
	for _, m := range s.members {
		st := m.client.Stats()
		c.Connects += st.Connects
		c.Reconnects += st.Reconnects
		c.Redirects += st.Redirects
		c.Elements += st.Elements
		c.Releases += st.Releases
		c.Reports += st.Reports
	}
	c.SessionsEnded, c.RedirectsTo, c.NoLeader = s.logs.snapshot()
	return c
}

// Sub is c − prev, counter by counter: what happened between two snapshots.
func (c Counters) Sub(prev Counters) Counters {
	out := Counters{
		Stats: leaseclient.Stats{
			Connects: c.Connects - prev.Connects, Reconnects: c.Reconnects - prev.Reconnects,
			Redirects: c.Redirects - prev.Redirects, Elements: c.Elements - prev.Elements,
			Releases: c.Releases - prev.Releases, Reports: c.Reports - prev.Reports,
		},
		SessionsEnded: map[string]uint64{}, RedirectsTo: map[string]uint64{}, NoLeader: c.NoLeader - prev.NoLeader,
	}
	for k, v := range c.SessionsEnded {
		if d := v - prev.SessionsEnded[k]; d > 0 {
			out.SessionsEnded[k] = d
		}
	}
	for k, v := range c.RedirectsTo {
		if d := v - prev.RedirectsTo[k]; d > 0 {
			out.RedirectsTo[k] = d
		}
	}
	return out
}
