package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// raftTransportTimeout bounds dials and RPC writes between voters: a cut-off peer must not stall
// heartbeats to the others for long.
const raftTransportTimeout = time.Second

// streamLayer is the Raft transport's listener and dialer: the listener is the node's Raft
// listener, Addr is the advertised address (it may be a proxy's), and Dial goes through
// Config.RaftDial when a test wants to cut this node's outbound traffic.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dial      func(ctx context.Context, addr string) (net.Conn, error)
	// gate, when set, holds every Accept until it is closed: a node joining from an empty data
	// directory takes no Raft traffic (and so casts no vote) before the leader accepted its join
	// (membership.go). The leader's RPCs wait in the listen backlog meanwhile.
	gate      <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (s *streamLayer) Accept() (net.Conn, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-s.closed:
			return nil, net.ErrClosed
		}
	}
	return s.Listener.Accept()
}

func (s *streamLayer) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.Listener.Close()
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(addr))
}

type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// raftParts is everything that has to be closed after raft shuts down.
type raftParts struct {
	raft      *raft.Raft
	transport *raft.NetworkTransport
	store     *raftboltdb.BoltStore
	unlock    func() error // the data directory's lock (datadirlock.go), released last
}

func (p *raftParts) close() error {
	var errs []error
	if p.raft != nil {
		errs = append(errs, p.raft.Shutdown().Error())
	}
	if p.transport != nil {
		errs = append(errs, p.transport.Close())
	}
	if p.store != nil {
		errs = append(errs, p.store.Close())
	}
	if p.unlock != nil {
		errs = append(errs, p.unlock())
		p.unlock = nil
	}
	return errors.Join(errs...)
}

// startRaft opens the log store, the snapshot store and the transport, recovers the stored state
// into a new configuration when asked (recover.go), starts Raft and bootstraps the cluster from
// Peers when this node has no Raft state yet and was not told to join a running one. Every voter bootstraps with the
// same configuration; a node that finds the cluster already bootstrapped gets ErrCantBootstrap,
// which is harmless.
func (n *Node) startRaft(ln net.Listener) (*raftParts, error) {
	cfg := n.cfg
	parts := &raftParts{}
	fail := func(err error) (*raftParts, error) {
		_ = parts.close()
		return nil, err
	}
	stores, err := n.openRaftStores(parts)
	if err != nil {
		return fail(err)
	}
	hasState := stores.hasState
	n.emptyLog = !hasState
	var gate <-chan struct{}
	if !hasState && len(cfg.Join) > 0 {
		gate = n.raftGate
	}
	parts.transport = n.newRaftTransport(ln, gate, stores.log)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.Logger = stores.log
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrBadConfig, err))
	}

	if cfg.Recover {
		if !hasState {
			return fail(fmt.Errorf("%w %s", ErrNothingToRecover, cfg.DataDir))
		}
		if err := n.recoverCluster(rc, stores.logs, parts.store, stores.snaps, parts.transport); err != nil {
			return fail(err)
		}
	}
	var trans raft.Transport = parts.transport
	if cfg.raftTransport != nil {
		trans = cfg.raftTransport(parts.transport)
	}
	r, err := raft.NewRaft(rc, n.fsm, stores.logs, parts.store, stores.snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("coordinator: start raft: %w", err))
	}
	parts.raft = r
	if hasState && !cfg.Recover {
		if f := r.GetConfiguration(); f.Error() == nil {
			n.warnPeersChanged(f.Configuration())
		}
	}
	// A node told to join a running cluster never bootstraps one of its own, not even with an
	// empty data directory: it would elect itself and serve leases beside the real cluster.
	if !hasState && len(cfg.Join) == 0 {
		err := r.BootstrapCluster(n.bootstrapConfiguration()).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fail(fmt.Errorf("coordinator: bootstrap: %w", err))
		}
	}
	return parts, nil
}

// raftStores are what Raft keeps on disk, opened: the log (behind a cache) and the snapshots;
// the bolt store itself is in raftParts, which closes it.
type raftStores struct {
	logs     raft.LogStore
	snaps    raft.SnapshotStore
	hasState bool // the data directory holds a log or a snapshot already
	log      hclog.Logger
}

// openRaftStores locks the data directory and opens Raft's log and snapshots in it, noting in
// parts what must be closed.
func (n *Node) openRaftStores(parts *raftParts) (raftStores, error) {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return raftStores{}, fmt.Errorf("coordinator: data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return raftStores{}, err
	}
	parts.unlock = unlock
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: time.Second},
		NoSync:      cfg.NoSync,
	})
	if err != nil {
		return raftStores{}, fmt.Errorf("coordinator: open raft log: %w", err)
	}
	parts.store = store
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		return raftStores{}, fmt.Errorf("coordinator: log cache: %w", err)
	}
	rlog := hclogFor(n.partLog("raft"), "raft")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, rlog)
	if err != nil {
		return raftStores{}, fmt.Errorf("coordinator: snapshot store: %w", err)
	}
	hasState, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return raftStores{}, fmt.Errorf("coordinator: read raft state: %w", err)
	}
	return raftStores{logs: logs, snaps: snaps, hasState: hasState, log: rlog}, nil
}

// newRaftTransport is Raft's network transport on ln (with TLS when configured), dialling peers
// with the configured dialer; a joining node's stream waits on gate before it serves anything.
func (n *Node) newRaftTransport(ln net.Listener, gate <-chan struct{}, rlog hclog.Logger) *raft.NetworkTransport {
	dial := n.cfg.RaftDial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	ln, dial = n.raftTLS(ln, dial)
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &streamLayer{Listener: ln, advertise: advertiseAddr(n.raftAddr), dial: dial,
			gate: gate, closed: make(chan struct{})},
		MaxPool: 3,
		// One AppendEntries in flight per follower: raft's own switch for synchronous
		// replication. With the default (2) the pipeline's channels are unbuffered, and a
		// follower answering Success=false (as one that restarted behind the leader's log does)
		// can park the pipeline's sender and decoder on each other for good: that follower then
		// gets heartbeats but no entries, and Shutdown waits on the stuck replication (the
		// mechanism grafana/pyroscope#5518 traced; a Shutdown hung here once after a restart).
		// The coordinator's log is a few small commands per second.
		MaxRPCsInFlight: 1,
		Timeout:         raftTransportTimeout,
		Logger:          rlog,
	})
}

func (n *Node) bootstrapConfiguration() raft.Configuration {
	if len(n.cfg.Peers) == 0 {
		return raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.NodeID), Address: raft.ServerAddress(n.raftAddr),
		}}}
	}
	var c raft.Configuration
	for _, p := range n.cfg.Peers {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	return c
}

// awaitFuture waits for an Apply or Barrier future, or until the node stops. hashicorp/raft can
// leave such a future unanswered forever when Raft shuts down between committing the entry and
// applying it (its FSM goroutine exits with the batch still queued; hashicorp/raft#498, open):
// waiting on Error() alone hung this node's Kill in a test. After the node stopped, the goroutine
// waiting on an unanswered future stays parked until the process exits; it holds nothing.
func (n *Node) awaitFuture(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		select {
		case err := <-done: // answered as the node stopped: keep the real outcome
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}
