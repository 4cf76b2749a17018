package ringtest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/testkit/ringtest/faultproxy"
)

// Coordinator is one coordinator node of the cluster, behind two proxies: one for Raft (inbound
// and, through Dial, outbound) and one for RSocket. Hang, Cut and Heal act on both.
type Coordinator struct {
	c     *Cluster
	Index int
	ID    string

	dataDir      string
	peers        []coordinator.Peer
	raftProxy    *faultproxy.Proxy
	rsocketProxy *faultproxy.Proxy

	mu      sync.Mutex
	n       *coordinator.Node
	running bool
	faulted bool
}

func (c *Cluster) newCoordinator(i int) (*Coordinator, error) {
	co := &Coordinator{c: c, Index: i, ID: fmt.Sprintf("c%d", i+1), dataDir: filepath.Join(c.dir, fmt.Sprintf("c%d", i+1))}
	var err error
	if co.raftProxy, err = faultproxy.Listen(""); err != nil {
		return nil, err
	}
	if co.rsocketProxy, err = faultproxy.Listen(""); err != nil {
		_ = co.raftProxy.Close()
		return nil, err
	}
	co.rsocketProxy.SetClassifier(c.classify)
	return co, nil
}

// start binds fresh listeners, points the proxies at them and starts a node on the data directory.
func (co *Coordinator) start() error {
	lns := make([]net.Listener, 0, 3)
	closeAll := func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeAll()
			return err
		}
		lns = append(lns, l)
	}
	o := co.c.opts
	n, err := coordinator.New(coordinator.Config{
		NodeID: co.ID, DataDir: co.dataDir, Peers: co.peers,
		Timing: o.Timing, SilenceTimeout: o.SilenceTimeout, ReconnectGrace: o.ReconnectGrace,
		HeartbeatTimeout: o.HeartbeatTimeout, ElectionTimeout: o.ElectionTimeout, LeaderLeaseTimeout: o.LeaderLeaseTimeout,
		NoSync:       true,
		Logger:       co.c.log,
		RaftListener: lns[0], RSocketListener: lns[1], HTTPListener: lns[2],
		RaftAdvertise:    co.raftProxy.Addr(),
		RSocketAdvertise: co.rsocketProxy.Addr(),
		RaftDial:         co.raftProxy.Dial,
	})
	if err != nil {
		closeAll()
		return err
	}
	co.raftProxy.SetTarget(lns[0].Addr().String())
	co.rsocketProxy.SetTarget(lns[1].Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), co.c.opts.Wait)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		return err // Start closes the listeners it was given
	}
	co.mu.Lock()
	co.n, co.running = n, true
	co.mu.Unlock()
	return nil
}

// Node is the running node (nil before the first start).
func (co *Coordinator) Node() *coordinator.Node { return co.node() }

func (co *Coordinator) node() *coordinator.Node {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.n
}

// Running reports whether the node was started and not killed or closed since.
func (co *Coordinator) Running() bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.running
}

// Faulted reports whether the node's network is hung or cut.
func (co *Coordinator) Faulted() bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.faulted
}

// IsLeader reports whether the node is running and leads.
func (co *Coordinator) IsLeader() bool {
	n := co.node()
	return co.Running() && n != nil && n.IsLeader()
}

// RSocketAddr is the address workers use for this node: its RSocket front proxy.
func (co *Coordinator) RSocketAddr() string { return co.rsocketProxy.Addr() }

// RaftAddr is the node's address in the Raft configuration: its Raft proxy.
func (co *Coordinator) RaftAddr() string { return co.raftProxy.Addr() }

// View is the node's view of the cluster and rings.
func (co *Coordinator) View() admin.RingView {
	if n := co.node(); n != nil {
		return n.View()
	}
	return admin.RingView{}
}

// Kill stops the node abruptly (kill -9): its network goes at once (every connection closes, as
// the kernel would close a dead process's sockets), then the node is killed. Killing a stopped
// node does nothing. A node that does not finish dying within Options.Wait fails the test.
func (co *Coordinator) Kill() {
	n := co.stopping(EventCoordKilled)
	if n == nil {
		return
	}
	co.raftProxy.Cut()
	co.rsocketProxy.Cut()
	co.bounded("kill", n.Kill)
}

// Close stops the node gracefully (it hands leadership over first), bounded like Kill.
func (co *Coordinator) Close() error {
	n := co.stopping(EventCoordClosed)
	if n == nil {
		return nil
	}
	var err error
	co.bounded("close", func() { err = n.Close() })
	return err
}

// bounded runs stop and waits for it at most Options.Wait; past that it fails the test and leaves
// stop running, so that a node stuck in its shutdown shows up as a failure, not as a hung test.
func (co *Coordinator) bounded(what string, stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop()
	}()
	if !waitClosed(done, co.c.opts.Wait) {
		co.c.t.Errorf("ringtest: %s of coordinator %s did not return within %v", what, co.ID, co.c.opts.Wait)
	}
}

// stopping marks the node stopped and notes kind, returning the node if it was running.
func (co *Coordinator) stopping(kind EventKind) *coordinator.Node {
	co.mu.Lock()
	n, was := co.n, co.running
	co.running = false
	co.mu.Unlock()
	if !was {
		return nil
	}
	co.c.rec.Note(Event{Kind: kind, Coordinator: co.ID, Fault: true})
	return n
}

// Restart starts a new node on the same data directory and proxies; the old one must be stopped.
func (co *Coordinator) Restart() error {
	if co.Running() {
		return fmt.Errorf("coordinator %s is running", co.ID)
	}
	co.c.rec.Note(Event{Kind: EventCoordRestarted, Coordinator: co.ID, Fault: true})
	if err := co.start(); err != nil {
		return err
	}
	co.setFaulted(false)
	co.raftProxy.Heal()
	co.rsocketProxy.Heal()
	return nil
}

// Hang makes the node's network silent: Raft and RSocket traffic stop both ways, connections stay open.
func (co *Coordinator) Hang() {
	co.c.rec.Note(Event{Kind: EventCoordHung, Coordinator: co.ID, Fault: true})
	co.setFaulted(true)
	co.raftProxy.Hang()
	co.rsocketProxy.Hang()
}

// Cut cuts the node off: its connections close and new ones are refused, Raft and RSocket alike.
func (co *Coordinator) Cut() {
	co.c.rec.Note(Event{Kind: EventCoordCut, Coordinator: co.ID, Fault: true})
	co.setFaulted(true)
	co.raftProxy.Cut()
	co.rsocketProxy.Cut()
}

// CutRaft cuts the node off from its Raft peers only: its workers stay connected to it. A
// leader cut so keeps its lease streams open while a new leader is elected behind its back, the
// case the deposed-leader rule (send only within LeaderLeaseTimeout of a quorum's contact) is for.
func (co *Coordinator) CutRaft() {
	co.c.rec.Note(Event{Kind: EventCoordCut, Coordinator: co.ID, Fault: true})
	co.setFaulted(true)
	co.raftProxy.Cut()
}

// Heal gives the node its network back.
func (co *Coordinator) Heal() {
	co.c.rec.Note(Event{Kind: EventCoordHealed, Coordinator: co.ID, Fault: true})
	co.setFaulted(false)
	co.raftProxy.Heal()
	co.rsocketProxy.Heal()
}

func (co *Coordinator) setFaulted(f bool) {
	co.mu.Lock()
	co.faulted = f
	co.mu.Unlock()
}

// close kills the node if it runs and closes its proxies (Cluster.Close).
func (co *Coordinator) close() {
	co.mu.Lock()
	n, was := co.n, co.running
	co.running = false
	co.mu.Unlock()
	_ = co.raftProxy.Close()
	_ = co.rsocketProxy.Close()
	if was {
		co.bounded("kill", n.Kill)
	}
}
