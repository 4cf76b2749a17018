package coordinator

import (
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/lease"
)

// askLeases connects to n as a fresh worker, sends SETUP and subscribes ring.leases, and returns
// the error n answers with; nil when n streamed instead (it leads).
func askLeases(t *testing.T, n *Node, worker string) *lease.WireError {
	t.Helper()
	conn := dialRaw(t, n.RSocketAddr())
	defer conn.Close()
	conn.send(validSetup(worker), requestStreamFrame(1, lease.RouteLeases, []byte("{}")))
	f, err := conn.next(5 * time.Second)
	if err != nil {
		t.Fatalf("%s: no answer to SETUP and ring.leases: %v", n.cfg.NodeID, err)
	}
	ef, ok := f.(*framing.ErrorFrame)
	if !ok {
		return nil
	}
	if ef.ErrorCode() != core.ErrorCodeApplicationError {
		t.Fatalf("%s: error code %s (%s), want APPLICATION_ERROR", n.cfg.NodeID, ef.ErrorCode(), ef.ErrorData())
	}
	we, ok := lease.FromWire(ef.ErrorData()).(*lease.WireError)
	if !ok {
		t.Fatalf("%s: error data %q is not a WireError", n.cfg.NodeID, ef.ErrorData())
	}
	return we
}

// wantCoordinators is the coordinators list every node of c sends: all of them, by id.
func wantCoordinators(c *testCluster) []lease.WireCoordinator {
	var out []lease.WireCoordinator
	for _, n := range c.nodes {
		out = append(out, lease.WireCoordinator{ID: n.cfg.NodeID, RSocketAddr: n.RSocketAddr()})
	}
	return out
}

// TestFollowerRedirectsOnlyToALiveLeader: a follower names the leader only while it hears from it.
// Once the leader is killed (no handover), a follower that has not heard from it within the
// election timeout answers no_leader at once with the coordinators it knows, even while Raft
// still names the dead node as leader; once a new leader is elected it names that one.
//
// The followers' heartbeat timeout is long (2 s), so Raft names the dead leader for at least that
// long after the kill: the window the fix is about, without racing an election. The followers'
// check of their last contact reads a clock the test moves past the election timeout at the
// kill, so nothing waits for it.
func TestFollowerRedirectsOnlyToALiveLeader(t *testing.T) {
	const slow = 2 * time.Second
	var skew [3]atomic.Int64
	c := newCluster(t, 3, func(i int, cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = slow, slow
		cfg.sinceContact = func(at time.Time) time.Duration { return time.Since(at) + time.Duration(skew[i].Load()) }
	})
	leader := c.leader()
	coords := wantCoordinators(c)
	eventually(t, 10*time.Second, "every node to know every registration", func() bool {
		for _, n := range c.nodes {
			if !reflect.DeepEqual(n.knownCoordinators(), coords) {
				return false
			}
		}
		return true
	})
	for i, f := range c.followers(leader) {
		we := askLeases(t, f, fmt.Sprintf("live-%d", i))
		if we == nil || we.Code != lease.CodeNotLeader || we.LeaderID != leader.cfg.NodeID || we.LeaderRSocketAddr != leader.RSocketAddr() {
			t.Fatalf("%s with a live leader %s answered %+v, want not_leader naming it", f.cfg.NodeID, leader.cfg.NodeID, we)
		}
	}

	dead := leader.cfg.NodeID
	leader.Kill()
	for i := range skew {
		skew[i].Store(int64(slow)) // as if the election timeout had passed since the kill
	}
	inWindow := 0
	for i, f := range c.followers(leader) {
		id, _ := f.Leader()
		we := askLeases(t, f, fmt.Sprintf("after-kill-%d", i))
		idAfter, _ := f.Leader()
		if we == nil {
			t.Fatalf("%s streamed leases right after the kill, before any election could end", f.cfg.NodeID)
		}
		if we.LeaderID == dead || we.LeaderRSocketAddr == leader.RSocketAddr() || we.Code != lease.CodeNoLeader {
			t.Errorf("%s after the kill of %s answered %+v, want no_leader naming nobody", f.cfg.NodeID, dead, we)
		}
		// A follower that still names the silent leader leaves it out of the list (a client would
		// cycle back onto it); one whose Raft already forgot the leader lists everybody.
		alive := slices.DeleteFunc(slices.Clone(coords), func(c lease.WireCoordinator) bool { return c.ID == dead })
		if id == dead && idAfter == dead {
			inWindow++
			if !reflect.DeepEqual(we.Coordinators, alive) {
				t.Errorf("%s after the kill, still naming %s: coordinators %+v, want %+v (without it)", f.cfg.NodeID, dead, we.Coordinators, alive)
			}
		} else if !reflect.DeepEqual(we.Coordinators, coords) && !reflect.DeepEqual(we.Coordinators, alive) {
			t.Errorf("%s after the kill: coordinators %+v, want %+v or %+v", f.cfg.NodeID, we.Coordinators, coords, alive)
		}
	}
	// The case the fix is for: Raft itself still named the dead leader around the answer.
	if inWindow == 0 {
		t.Fatalf("no follower still took %s for the leader when asked: the test missed the window it is about", dead)
	}

	for i := range skew {
		skew[i].Store(0)
	}
	next := c.leader()
	for i, f := range c.followers(next) {
		we := askLeases(t, f, fmt.Sprintf("new-leader-%d", i))
		if we == nil || we.Code != lease.CodeNotLeader || we.LeaderID != next.cfg.NodeID || we.LeaderRSocketAddr != next.RSocketAddr() {
			t.Fatalf("%s with the new leader %s answered %+v, want not_leader naming it", f.cfg.NodeID, next.cfg.NodeID, we)
		}
	}
}
