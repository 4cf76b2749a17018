package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// stuckFuture is a raft future that Raft never answers (hashicorp/raft#498) until released.
type stuckFuture struct{ release chan error }

func (f stuckFuture) Error() error { return <-f.release }

// TestAwaitFutureReturnsWhenTheNodeStops: a future Raft never answers does not keep the node from
// stopping; a future answered before that gives its own outcome.
func TestAwaitFutureReturnsWhenTheNodeStops(t *testing.T) {
	n := &Node{stop: make(chan struct{})}
	answered := stuckFuture{release: make(chan error, 1)}
	want := errors.New("fsm said no")
	answered.release <- want
	if err := n.awaitFuture(answered); !errors.Is(err, want) {
		t.Fatalf("answered future: %v, want %v", err, want)
	}

	stuck := stuckFuture{release: make(chan error)}
	defer close(stuck.release) // lets the parked waiter end with the test
	got := make(chan error, 1)
	go func() { got <- n.awaitFuture(stuck) }()
	select {
	case err := <-got:
		t.Fatalf("returned %v before the node stopped", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(n.stop)
	select {
	case err := <-got:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("after the node stopped: %v, want ErrRaftShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("awaitFuture still waiting after the node stopped")
	}
}

// TestReplicationIsNotPipelined: the transport refuses a pipeline, so Raft replicates with one
// AppendEntries at a time (see startRaft for the deadlock pipelining risks).
func TestReplicationIsNotPipelined(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.leader()
	if _, err := n.parts.transport.AppendEntriesPipeline("peer", "127.0.0.1:1"); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}

// TestCanSendOnlyWithinTheLeaderLeaseOfAQuorumContact: a leader may write lease elements only
// while its term is ready and less than LeaderLeaseTimeout has passed since the start of the last
// proof of leadership (a barrier or a commit); an older proof never shortens a newer one,
// and an ended term sends nothing.
func TestCanSendOnlyWithinTheLeaderLeaseOfAQuorumContact(t *testing.T) {
	const llt = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := &leaderTerm{n: &Node{cfg: Config{LeaderLeaseTimeout: llt}}, ctx: ctx}
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

	term.extendVerified(t0)
	if term.canSend(t0) {
		t.Fatal("sent before the term was ready (its barrier not run)")
	}
	term.mu.Lock()
	term.ready = true
	term.mu.Unlock()
	if !term.canSend(t0.Add(llt - time.Nanosecond)) {
		t.Error("refused just inside the leader lease")
	}
	if term.canSend(t0.Add(llt)) {
		t.Error("sent at the end of the leader lease: a newer leader may exist by then")
	}
	term.extendVerified(t0.Add(-time.Second)) // a late answer to an older verification
	if term.canSend(t0.Add(llt)) {
		t.Error("an older quorum contact extended the lease")
	}
	term.extendVerified(t0.Add(llt))
	if !term.canSend(t0.Add(llt + llt/2)) {
		t.Error("a newer quorum contact did not extend the lease")
	}
	cancel()
	if term.canSend(t0.Add(llt + llt/2)) {
		t.Error("an ended term still sends")
	}
}
