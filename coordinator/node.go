package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Node is one coordinator: a Raft voter, an RSocket server for workers and an admin HTTP server.
// Create it with New, run it with Start, stop it with Close (graceful) or Kill (abrupt).
type Node struct {
	cfg Config
	// nodeLog is cfg.Logger with the node id: the parent of every part's logger (partLog).
	nodeLog zerolog.Logger
	log     zerolog.Logger
	clock   lease.Clock
	fsm     *fsm.FSM
	conns   *connRegistry
	retired *retiredSet
	// supersededSeen: an applied entry showed a newer incarnation of some worker id
	// (forwardChanges then ends the old incarnation's streams).
	supersededSeen atomic.Bool
	metrics        *nodeMetrics
	auth           *auth.Authenticator // set by Start
	// refusalLog logs refused credentials at most refusalLogBurst a second (set by Start).
	refusalLog zerolog.Logger
	limits     *limits
	tls        *auth.Setup // TLS of the listeners and of Raft (tls.go)
	tlsLog     tlsLogs

	// Set by Start, read-only afterwards.
	raft        *raft.Raft
	leadership  raftLeadership // n.raft unless a test wraps it (Config.leadership)
	parts       *raftParts
	rsListener  *silenceListener
	httpServer  *http.Server
	raftAddr    string // advertised
	rsocketAddr string
	httpAddr    string
	serveCancel context.CancelFunc

	stop         chan struct{}
	wg           sync.WaitGroup
	registerKick chan struct{}

	handingOver atomic.Bool // a halted leader's leadership transfer is under way
	// leaving: this node is removing itself from the configuration (membership.go); it must not
	// register its addresses again.
	leaving atomic.Bool
	// emptyLog: Raft found no state in the data directory at start (a joining node says so).
	emptyLog bool
	// failed receives the error that stopped this node from working on its own (a refused join);
	// see Failed.
	failed chan error
	// raftGate holds a joining node's Raft listener until its join is accepted (raftnode.go);
	// openRaftGate closes it.
	raftGate     chan struct{}
	raftGateOnce sync.Once

	mu      sync.Mutex
	started bool
	closed  bool
	term    *leaderTerm // non-nil while this node is the leader
}

// New checks cfg and builds a node; nothing is opened before Start.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	tlsSetup, err := auth.NewSetup(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	n := &Node{
		tls:          tlsSetup,
		cfg:          cfg,
		nodeLog:      cfg.Logger.With().Str("node_id", cfg.NodeID).Logger(),
		clock:        cfg.Clock,
		stop:         make(chan struct{}),
		registerKick: make(chan struct{}, 1),
		failed:       make(chan error, 1),
		raftGate:     make(chan struct{}),
		retired:      newRetiredSet(),
	}
	n.log = n.partLog("coordinator")
	n.fsm = fsm.NewAt(n.partLog("fsm"), cmp.Or(cfg.fsmVersion, fsm.Version))
	n.fsm.Observe(func(s *fsm.State, c fsm.Command) {
		if mayShowASupersede(c) && n.retired.note(s, n.clock.Now()) {
			n.supersededSeen.Store(true)
		}
	})
	n.conns = newConnRegistry(n.connsChanged, n.retired.has)
	n.metrics = newNodeMetrics(n)
	n.limits = newLimits(cfg, n.metrics)
	n.limits.closedBeforeSetup = n.closedBeforeSetupLogger()
	return n, nil
}

// Start binds the listeners (or takes the configured ones), starts Raft (bootstrapping from Peers
// on first start), the RSocket and HTTP servers and the node's loops. ctx bounds the start only;
// the node runs until Close or Kill.
func (n *Node) Start(ctx context.Context) (err error) {
	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return ErrClosed
	case n.started:
		n.mu.Unlock()
		return ErrStarted
	}
	n.started = true
	n.mu.Unlock()

	var toClose []net.Listener
	defer func() {
		if err != nil {
			for _, l := range toClose {
				_ = l.Close()
			}
			// A node that failed to start cannot start again: its given listeners are closed.
			n.mu.Lock()
			n.started, n.closed = false, true
			n.mu.Unlock()
		}
	}()
	listen := func(given net.Listener, addr string) (net.Listener, error) {
		if given != nil {
			toClose = append(toClose, given)
			return given, nil
		}
		var lc net.ListenConfig
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("coordinator: listen %s: %w", addr, err)
		}
		toClose = append(toClose, l)
		return l, nil
	}
	raftLn, err := listen(n.cfg.RaftListener, n.cfg.RaftAddr)
	if err != nil {
		return err
	}
	rsLn, err := listen(n.cfg.RSocketListener, n.cfg.RSocketAddr)
	if err != nil {
		return err
	}
	httpLn, err := listen(n.cfg.HTTPListener, n.cfg.HTTPAddr)
	if err != nil {
		return err
	}
	if err := n.cfg.checkSelfPeer(ctx, raftLn.Addr()); err != nil {
		return err
	}
	if err := n.startAuth(); err != nil {
		return err
	}
	n.raftAddr = n.cfg.raftAdvertise(raftLn.Addr().String())
	if n.cfg.TLS.Raft.Enabled() {
		if err := auth.CheckRaftCertificate(n.cfg.TLS.Raft, n.raftAddr, n.tlsNow()); err != nil {
			return fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	n.rsocketAddr = orDefault(n.cfg.RSocketAdvertise, rsLn.Addr().String())
	n.httpAddr = orDefault(n.cfg.HTTPAdvertise, httpLn.Addr().String())
	n.rsListener = newSilenceListener(n.limits.listener(rsLn), n.cfg.SilenceTimeout, n.cfg.WriteTimeout)
	n.rsListener.tls, n.rsListener.tlsFailed = n.tls.RSocket, n.rsocketHandshakeFailed
	n.rsListener.tlsSlots = make(chan struct{}, auth.MaxConcurrentHandshakes)

	parts, err := n.startRaft(raftLn)
	if err != nil {
		return err
	}
	n.parts, n.raft = parts, parts.raft
	n.leadership = parts.raft
	if n.cfg.leadership != nil {
		n.leadership = n.cfg.leadership(parts.raft)
	}

	serveCtx, cancel := context.WithCancel(context.Background())
	n.serveCancel = cancel
	// Bounded reads and idle connections: a client that opens connections and sends nothing more
	// does not keep them (and their descriptors, which Raft and RSocket need too) for ever.
	n.httpServer = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	httpLn = n.adminTLS(n.httpServer, httpLn)

	n.spawn(func() { n.serveRSocket(serveCtx) })
	n.spawn(func() {
		if err := n.httpServer.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error().Err(err).Msg("admin http server stopped")
		}
	})
	n.spawn(n.watchLeadership)
	n.spawn(n.forwardChanges)
	n.spawn(n.registerLoop)
	if len(n.cfg.Join) > 0 {
		n.spawn(n.joinLoop)
	}
	n.spawn(func() { n.auth.Run(n.stop) })
	n.log.Info().Str("raft_addr", n.raftAddr).Str("rsocket_addr", n.rsocketAddr).Str("http_addr", n.httpAddr).
		Msg("coordinator started")
	return nil
}

// Failed delivers the error that stopped this node from working on its own: a join the cluster
// refused (ErrJoinRefused). The node is still open; its owner closes it and exits with the error
// rather than retrying what an operator has to decide.
func (n *Node) Failed() <-chan error { return n.failed }

func (n *Node) openRaftGate() { n.raftGateOnce.Do(func() { close(n.raftGate) }) }

func (n *Node) fail(err error) {
	select {
	case n.failed <- err:
	default:
	}
}

// tlsNow is the time the certificates are checked at (TLS.Now, else the system's).
func (n *Node) tlsNow() time.Time {
	if n.cfg.TLS.Now != nil {
		return n.cfg.TLS.Now()
	}
	return time.Now()
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

func (n *Node) spawn(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// Close stops the node gracefully: if it leads, it hands leadership to another voter first, so
// that workers find a new leader within milliseconds; then it closes worker connections, the
// servers and Raft.
func (n *Node) Close() error {
	if !n.beginClose() {
		return nil
	}
	if n.raft != nil && n.raft.State() == raft.Leader {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn().Err(err).Msg("leadership transfer before shutdown failed")
		}
	}
	return n.shutdown(true)
}

// Kill stops the node abruptly, as kill -9 would: no leadership transfer, no goodbye to workers.
// Listeners, connections and Raft are closed at once, so the other nodes and the workers see the
// node vanish.
func (n *Node) Kill() {
	if n.beginClose() {
		_ = n.shutdown(false)
	}
}

func (n *Node) beginClose() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.closed = true
	return n.started
}

func (n *Node) shutdown(graceful bool) error {
	close(n.stop)
	n.mu.Lock()
	t := n.term
	n.term = nil
	n.mu.Unlock()
	if t != nil {
		t.stop(graceful, n.leaderErr())
	}
	// Cancelling the serve context closes the RSocket listener and every worker connection.
	n.serveCancel()
	_ = n.rsListener.Close()
	for _, c := range n.conns.snapshot() {
		c.close()
	}
	var errs []error
	if graceful {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		errs = append(errs, n.httpServer.Shutdown(ctx))
		cancel()
	} else {
		errs = append(errs, n.httpServer.Close())
	}
	if !graceful {
		// Close the transport before Raft so that peers see the node gone at once.
		errs = append(errs, n.parts.transport.Close())
	}
	errs = append(errs, n.parts.close())
	if n.tls.PeerTransport != nil {
		n.tls.PeerTransport.CloseIdleConnections()
	}
	if t != nil {
		t.wg.Wait() // its Raft calls returned when Raft shut down
	}
	n.wg.Wait()
	n.log.Info().Bool("graceful", graceful).Msg("coordinator stopped")
	if err := errors.Join(errs...); err != nil && graceful {
		return err
	}
	return nil
}

// IsLeader reports whether this node is the Raft leader.
func (n *Node) IsLeader() bool {
	return n.raft != nil && n.raft.State() == raft.Leader
}

// Leader returns the leader's node id and RSocket address as this node knows them; empty when no
// leader is known (or it has not registered its address yet).
func (n *Node) Leader() (id, rsocketAddr string) {
	if n.raft == nil {
		return "", ""
	}
	_, lid := n.raft.LeaderWithID()
	id = string(lid)
	if id == "" {
		return "", ""
	}
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if c := s.Coordinators[id]; c != nil {
			rsocketAddr = c.RSocketAddr
		}
	})
	return id, rsocketAddr
}

// RSocketAddr is the RSocket address this node registers (the bound one unless advertised).
func (n *Node) RSocketAddr() string { return n.rsocketAddr }

// HTTPAddr is the admin HTTP address this node registers.
func (n *Node) HTTPAddr() string { return n.httpAddr }

// RaftAddr is this node's address in the Raft configuration.
func (n *Node) RaftAddr() string { return n.raftAddr }

// currentTerm returns the leadership term, or nil when this node does not lead.
func (n *Node) currentTerm() *leaderTerm {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.term
}

// redirect is leaderErr for a worker's request this node cannot serve, counted for /metrics.
func (n *Node) redirect() error {
	n.metrics.notLeader.Add(1)
	return n.leaderErr()
}

// leaderErr is the error a follower answers with: not_leader naming the leader, or no_leader when
// it knows no leader whose address it could give. Why the contact check: Raft goes on naming a
// leader that died until this node's heartbeat timer notices, up to twice the heartbeat timeout
// after the last contact, and every worker sent there meanwhile dials a dead node and backs off.
// So a leader this node has not heard from within the election timeout is not named: no_leader
// comes at once instead, listing the coordinators this node knows (knownCoordinators), so that a
// client tries the next of them, not the dead address again (protocol.md section 9.1).
func (n *Node) leaderErr() error {
	id, addr := n.Leader()
	noLeader := func(format string, args ...any) error {
		return &lease.WireError{Code: lease.CodeNoLeader, Message: fmt.Sprintf(format, args...), Coordinators: n.knownCoordinators()}
	}
	switch {
	case id == "":
		return noLeader("no leader known")
	case id == n.cfg.NodeID:
		return noLeader("this node is taking or leaving the lead; retry")
	case addr == "":
		return noLeader("leader %s has not registered its address yet", id)
	}
	// LastContact is when this node last accepted an AppendEntries (a heartbeat included) or
	// granted a vote, on the process clock.
	sinceContact := time.Since
	if n.cfg.sinceContact != nil {
		sinceContact = n.cfg.sinceContact
	}
	if since := sinceContact(n.raft.LastContact()); since >= n.cfg.ElectionTimeout {
		// The silent leader is left out of the list: a client adds the list to its addresses and
		// would otherwise cycle back onto a node that is probably dead.
		we := noLeader("leader %s not heard from for %v (election timeout %v)", id, since.Round(time.Millisecond), n.cfg.ElectionTimeout).(*lease.WireError)
		we.Coordinators = slices.DeleteFunc(we.Coordinators, func(c lease.WireCoordinator) bool { return c.ID == id })
		return we
	}
	return &lease.WireError{Code: lease.CodeNotLeader, LeaderID: id, LeaderRSocketAddr: addr}
}

// knownCoordinators lists the registered coordinators with a valid RSocket address, this one
// included, sorted by id and at most lease.MaxWireCoordinators of them: what a client keeps of a
// list (lease.FromWire), so that a bad registration costs no other entry.
func (n *Node) knownCoordinators() []lease.WireCoordinator {
	var out []lease.WireCoordinator
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for id, c := range s.Coordinators {
			if wc := (lease.WireCoordinator{ID: id, RSocketAddr: c.RSocketAddr}); wc.Validate() == nil {
				out = append(out, wc)
			}
		}
	})
	slices.SortFunc(out, func(a, b lease.WireCoordinator) int { return strings.Compare(a.ID, b.ID) })
	if len(out) > lease.MaxWireCoordinators {
		out = out[:lease.MaxWireCoordinators]
	}
	return out
}

// watchLeadership starts a term when this node becomes leader and stops it when it no longer is.
// Observations only wake it (they may be dropped when the channel is full); it reads the state
// from Raft each time, and also polls, so a missed observation costs at most one poll period.
func (n *Node) watchLeadership() {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(observer)
	defer n.raft.DeregisterObserver(observer)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-obs:
		case <-poll.C:
		}
		n.syncLeadership()
	}
}

// raftLeadership is what syncLeadership reads of Raft: whether this node leads, and in which term.
type raftLeadership interface {
	State() raft.RaftState
	CurrentTerm() uint64
}

// leadingTerm reads the Raft term this node leads in; ok is false when it does not lead. The term
// is read on both sides of the state so that the pair belongs to one term: a node leads at most
// once per term, so an unchanged term around State() == Leader is the term it leads in.
func (n *Node) leadingTerm() (term uint64, ok bool) {
	for {
		before := n.leadership.CurrentTerm()
		leader := n.leadership.State() == raft.Leader
		if after := n.leadership.CurrentTerm(); after == before {
			return before, leader
		}
	}
}

// syncLeadership makes n.term match the Raft term this node leads in. A stretch of leadership
// belongs to one Raft term: when the node leads in a term other than its stretch's, it stepped
// down and was elected again between two looks (polls are 50 ms apart and observations may be
// dropped), and another leader may have sent leases meanwhile. The old stretch's election time,
// barrier and proof of leadership say nothing about those, so it ends and a new one starts.
func (n *Node) syncLeadership() {
	raftTerm, leader := n.leadingTerm()
	if leader && n.fsm.Halted() != nil {
		// Its state stops at an entry it does not know: it must neither plan nor send from it.
		leader = false
		n.handOverHalted()
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	t := n.term
	switch {
	case leader && t != nil && t.raftTerm != raftTerm:
		next := newLeaderTerm(n, raftTerm)
		n.term = next
		n.mu.Unlock()
		n.log.Warn().Uint64("raft_term", raftTerm).Uint64("previous_raft_term", t.raftTerm).
			Msg("leader again in a later term: ending the earlier stretch, waiting out leases another leader may have sent")
		t.stop(true, n.leaderErr())
		next.start()
		return
	case leader && t == nil:
		t = newLeaderTerm(n, raftTerm)
		n.term = t
		n.mu.Unlock()
		n.log.Info().Uint64("raft_term", raftTerm).Msg("became leader")
		t.start()
		return
	case !leader && t != nil:
		n.term = nil
		n.mu.Unlock()
		n.log.Info().Uint64("raft_term", t.raftTerm).Msg("lost leadership")
		t.stop(true, n.leaderErr())
		n.kickRegister()
		return
	}
	n.mu.Unlock()
}

// handOverHalted gives the leadership of a halted node to another voter, once per stretch of
// leadership; raft elects it again only if no other voter can lead.
func (n *Node) handOverHalted() {
	if !n.handingOver.CompareAndSwap(false, true) {
		return
	}
	n.log.Error().Err(n.fsm.Halted()).Msg("leader with a halted state: handing leadership over")
	n.spawn(func() {
		defer n.handingOver.Store(false)
		if err := n.awaitFuture(n.raft.LeadershipTransfer()); err != nil {
			n.log.Warn().Err(err).Msg("leadership transfer of a halted node failed")
		}
	})
}

// forwardChanges wakes the leader's loops and the registration loop after applied entries.
func (n *Node) forwardChanges() {
	for {
		select {
		case <-n.stop:
			return
		case <-n.fsm.Changed():
		}
		if n.supersededSeen.Swap(false) {
			n.endSupersededStreams()
		}
		if t := n.currentTerm(); t != nil {
			t.kickReconcile()
			t.wakeStreams(false)
		}
		n.kickRegister()
	}
}

// endSupersededStreams ends, with the duplicate_connection error, the lease streams of every
// connection whose incarnation a newer one superseded: such a stream would otherwise stay open and
// silent (the state gives an inactive member nothing), and the old process would never learn why.
func (n *Node) endSupersededStreams() {
	for _, c := range n.conns.snapshot() {
		if !n.retired.has(c.member) {
			continue
		}
		for _, s := range c.streamList() {
			s.terminate(supersededError(c.setup))
		}
	}
}

func (n *Node) connsChanged() {
	if t := n.currentTerm(); t != nil {
		t.kickReconcile()
	}
}

func (n *Node) kickRegister() {
	select {
	case n.registerKick <- struct{}{}:
	default:
	}
}

// apply commits one command through Raft and returns its error in the wire catalog. A successful
// commit also renews the leader's right to send (see leaderTerm.extendVerified).
func (n *Node) apply(cmd fsm.Command) error {
	t := n.currentTerm()
	if t == nil {
		return n.leaderErr()
	}
	return t.apply(cmd)
}
