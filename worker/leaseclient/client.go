package leaseclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/lease"
)

// maxRedirects bounds how many not_leader hints in a row are followed without a lease element in
// between; then the client backs off, so that two nodes naming each other cannot make it spin.
const maxRedirects = 4

// Client holds one worker's lease of one ring. Its methods are safe for concurrent use.
type Client struct {
	cfg      Config
	log      zerolog.Logger
	guard    *lease.Guard
	routes   map[string][]byte
	rel      *releaser
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
	connects, reconnects, redirects, elements, releases atomic.Uint64
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
	for _, r := range []string{lease.RouteLeases, lease.RouteRelease, lease.RouteLeave, lease.RouteView} {
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
	}
}

// Run connects, follows redirects to the leader, subscribes to the lease stream and keeps the Guard
// fed, reconnecting with backoff after every failure. It returns nil after Leave and ctx's error
// when ctx ends; it can be called once.
func (c *Client) Run(ctx context.Context) error {
	if c.isLeaving() {
		return ErrClosed
	}
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer close(c.runDone)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.rel.run(ctx)
	}()
	go func() { // Leave interrupts a dial or a request in flight
		defer wg.Done()
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	coords := c.cfg.Coordinators
	next := rand.IntN(len(coords))
	attempt, redirects := 0, 0
	target := ""
	for {
		addr := target
		if addr == "" {
			addr = coords[next%len(coords)]
			next++
		}
		target = ""
		got, err := c.runSession(ctx, addr)
		select {
		case <-c.stop:
			return nil
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if got {
			attempt, redirects = 0, 0
		}
		if leaderID, leaderAddr, ok := redirectTarget(err); ok && redirects < maxRedirects {
			redirects++
			c.stats.redirects.Add(1)
			c.stats.reconnects.Add(1)
			c.log.Info().Str("coordinator_addr", addr).Str("leader_id", leaderID).
				Str("leader_addr", leaderAddr).Msg("following not_leader to the leader")
			target = leaderAddr
			continue
		}
		redirects = 0
		d := c.cfg.Backoff.delay(attempt, rand.Float64())
		attempt++
		c.log.Warn().Err(err).Str("coordinator_addr", addr).Int64("backoff_ms", d.Milliseconds()).
			Msg("lease stream ended, reconnecting")
		if !c.sleep(ctx, d) {
			select {
			case <-c.stop:
				return nil
			default:
				return ctx.Err()
			}
		}
		c.stats.reconnects.Add(1)
	}
}

// sleep waits d; false if ctx ended or Leave was called first.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-c.stop:
		return false
	}
}

// runSession runs one connection until it fails, ctx ends or Leave stops it. got tells whether any
// lease element arrived on it.
func (c *Client) runSession(ctx context.Context, addr string) (got bool, err error) {
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sess, err := c.dial(sctx, addr)
	if err != nil {
		return false, err
	}
	c.stats.connects.Add(1)
	if !c.setSession(sess) {
		sess.close()
		return false, ErrClosed
	}
	defer func() {
		c.clearSession(sess)
		sess.close()
	}()
	c.rel.wake() // a release that failed on the previous connection goes out on this one
	c.log.Debug().Str("coordinator_addr", addr).Msg("connected")

	st := newLeaseStream(c, sess)
	req, err := json.Marshal(lease.LeasesRequest{WorkerID: c.cfg.WorkerID})
	if err != nil {
		return false, fmt.Errorf("leaseclient: encoding the leases request: %w", err)
	}
	if err := subscribe(sctx, sess, payload.New(req, c.routes[lease.RouteLeases]), st); err != nil {
		return false, err
	}

	select {
	case <-st.done:
		err = st.result()
	case <-sess.closed:
		err = sess.err()
		if st.finished() {
			if serr := st.result(); !errors.Is(serr, ErrDisconnected) {
				err = serr // the coordinator's own reason beats "connection closed"
			}
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.stop:
		err = nil
	}
	return st.gotElement.Load(), err
}

// subscribe opens the lease stream. If the connection closes between SETUP and this call,
// reactor-go's processor closes its "subscribed" channel twice and panics; that is a lost
// connection, not a crash.
func subscribe(ctx context.Context, sess *session, req payload.Payload, st *leaseStream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s closed while subscribing (%v)", ErrDisconnected, sess.addr, r)
			st.finish(err)
		}
	}()
	sess.sock.RequestStream(req).SubscribeWith(ctx, st) // st.demand sends REQUEST_STREAM through sess.send
	return nil
}

// dial opens a connection and sends SETUP. rsocket-go does not wait for an answer: a REJECTED_SETUP
// arrives later through the session's close callback.
func (c *Client) dial(ctx context.Context, addr string) (*session, error) {
	setup, err := json.Marshal(lease.Setup{
		WorkerID: c.cfg.WorkerID, Incarnation: c.cfg.Incarnation,
		Region: c.cfg.Ring.Region, Cluster: c.cfg.Ring.Cluster, Service: c.cfg.Ring.Service,
		Token: c.cfg.Token,
	})
	if err != nil {
		return nil, fmt.Errorf("leaseclient: encoding SETUP: %w", err)
	}
	sess := &session{addr: addr, routes: c.routes, closed: make(chan struct{})}
	// rsocket-go closes the connection by itself when the context given to Start ends, without the
	// session's send lock (see session.sendMu). So Start gets a context that only ends after
	// session.close; ctx may interrupt the dial, not the connection.
	rsctx, rscancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDialCancel := context.AfterFunc(ctx, rscancel)
	sock, err := rsocket.Connect().
		DataMimeType(lease.DataMIME).
		MetadataMimeType(lease.MetadataMIME).
		SetupPayload(payload.New(setup, nil)).
		// KeepAlive sets lifetime = ackTimeout × missedAcks; pass the lifetime whole.
		KeepAlive(c.cfg.Keepalive, c.cfg.KeepaliveLifetime, 1).
		ConnectTimeout(c.cfg.DialTimeout).
		OnClose(sess.onClose).
		Transport(tcpTransport(addr, c.cfg.KeepaliveLifetime, func(sc *silenceConn) { sc.readFailed = sess.readFailed })).
		Start(rsctx)
	if !stopDialCancel() {
		if err == nil {
			_ = sock.Close()
		}
		rscancel()
		return nil, ctx.Err()
	}
	if err != nil {
		rscancel()
		return nil, fmt.Errorf("%w: connecting to %s: %w", ErrDisconnected, addr, err)
	}
	sess.sock, sess.cancel = sock, rscancel
	return sess, nil
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

// Leave leaves the ring gracefully and stops Run: the Guard is cleared first (nothing new starts on
// any range), then Drain runs with an empty new lease, then ring.leave frees every range at the
// coordinator. The Guard is cleared before ring.leave, not after, because the coordinator may hand
// the ranges on as soon as it has committed the leave. If Drain fails, no ring.leave is sent (the
// ranges become free at expiry). Without a connection Leave returns ErrNotConnected, and the lease
// simply expires. The client cannot be used after Leave.
func (c *Client) Leave(ctx context.Context) error {
	c.mu.Lock()
	if c.leaving {
		c.mu.Unlock()
		return ErrClosed
	}
	c.leaving = true
	sess := c.sess
	old, had := c.guard.Current()
	c.guard.Clear()
	c.mu.Unlock()
	c.rel.cancel()

	err := func() error {
		if had {
			// No ranges, and NodeIndex -1 because 0 would mean Node-0.
			empty := lease.Lease{WorkerID: old.WorkerID, Ring: old.Ring, Epoch: old.Epoch, NodeIndex: -1, NodeCount: old.NodeCount}
			if err := c.drain(ctx, old, empty); err != nil {
				return fmt.Errorf("leaseclient: not leaving, drain failed: %w", err)
			}
		}
		if sess == nil {
			return ErrNotConnected
		}
		if err := sess.ack(ctx, lease.RouteLeave, lease.LeaveRequest{WorkerID: c.cfg.WorkerID}); err != nil {
			return err
		}
		c.log.Info().Msg("left the ring")
		return nil
	}()
	c.stopOnce.Do(func() { close(c.stop) })
	if c.started.Load() {
		select {
		case <-c.runDone:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	}
	return err
}

// View returns the ring view (the JSON of GET /v1/ring) from the coordinator this client is
// connected to.
func (c *Client) View(ctx context.Context) ([]byte, error) {
	sess := c.session()
	if sess == nil {
		return nil, ErrNotConnected
	}
	return sess.call(ctx, lease.RouteView, struct{}{})
}
