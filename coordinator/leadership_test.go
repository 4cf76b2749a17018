package coordinator

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// frozenLeadership reports Raft's state and term as they were when the test froze it, until it
// thaws: syncLeadership misses a step-down and a re-election that both happened between two of
// its polls, with no observation in between (the observer channel drops them when full).
type frozenLeadership struct {
	raftLeadership

	mu     sync.Mutex
	frozen bool
	state  raft.RaftState
	term   uint64
}

func (f *frozenLeadership) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen, f.state, f.term = true, f.raftLeadership.State(), f.raftLeadership.CurrentTerm()
}

func (f *frozenLeadership) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = false
}

func (f *frozenLeadership) State() raft.RaftState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return f.state
	}
	return f.raftLeadership.State()
}

func (f *frozenLeadership) CurrentTerm() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		return f.term
	}
	return f.raftLeadership.CurrentTerm()
}

// reelectedUnnoticed is the story of finding 3 of the safety review of issue 16: X leads term T
// with a ready stretch; X is deposed, Y leads T+1 (and would renew workers' leases); X is elected
// again in T+2 before syncLeadership looks (X's view of its leadership is frozen meanwhile). It
// returns X, X's seam (still frozen) and X's stretch of term T, still running.
//
// Elections happen only when the test asks for one (heartbeat and election timeouts of an hour,
// as in TestLateAcknowledgementDoesNotRenewADeposedLeader), and the renewal period is minutes
// long: the stretch proves its leadership only when the test asks. Raft's leader lease is minutes
// long too: at 250 ms a leader whose replication goroutines starved that long on a loaded machine
// stepped down ("failed to contact quorum of nodes"), and with hour-long election timers nobody
// led again. The first election is a bare TimeoutNow (no leader appends meanwhile); the later ones
// are leadership transfers (transferLeadership).
func reelectedUnnoticed(t *testing.T) (x *Node, seam *frozenLeadership, old *leaderTerm) {
	t.Helper()
	wires := make([]*raftWire, 3)
	seams := make([]*frozenLeadership, 3)
	c := newCluster(t, 3, func(i int, cfg *Config) {
		cfg.Timing = lease.Timing{TTL: 10 * time.Minute, Renewal: 5 * time.Minute, Margin: 100 * time.Millisecond}
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Hour, time.Hour
		cfg.LeaderLeaseTimeout = 5 * time.Minute
		cfg.raftTransport = func(nt *raft.NetworkTransport) raft.Transport {
			wires[i] = newRaftWire(nt)
			return wires[i]
		}
		cfg.leadership = func(r raftLeadership) raftLeadership {
			seams[i] = &frozenLeadership{raftLeadership: r}
			return seams[i]
		}
	})
	x, y := c.nodes[0], c.nodes[1]
	logsEven(t, c.nodes...)
	standForElection(t, wires[1], y, x)
	if c.leader() != x {
		t.Fatalf("leader is not %s", x.cfg.NodeID)
	}
	old = x.currentTerm()
	eventually(t, 10*time.Second, "X's stretch ready", old.isReady)
	seam = seams[0]
	seam.freeze()

	transferLeadership(t, x, y)
	eventually(t, 10*time.Second, "Y leading in a later term, past its barrier", func() bool {
		yt := y.currentTerm()
		return yt != nil && yt.raftTerm > old.raftTerm && yt.isReady() && x.raft.State() != raft.Leader
	})
	transferLeadership(t, y, x)
	eventually(t, 10*time.Second, "X leading again, two terms later", func() bool {
		return x.raft.State() == raft.Leader && x.raft.CurrentTerm() >= old.raftTerm+2 && y.currentTerm() == nil
	})
	if x.currentTerm() != old {
		t.Fatal("X noticed the re-election: its view of its leadership was not frozen")
	}
	return x, seam, old
}

// transferLeadership makes the leader from hand its leadership to `to` and returns once from has
// stepped down. A bare TimeoutNow after logsEven is not enough while a leader runs: its stretch
// may append an entry (a proof of leadership, a reconcile's commit) between the two, and `to`, one
// entry short, is refused by both voters (seen under load: "rejecting vote request since our last
// index is greater"); the leader steps down on the higher term and, with hour-long election
// timers, nobody leads again. Raft's transfer refuses new entries and brings to's log up to the
// leader's before it sends the TimeoutNow.
func transferLeadership(t *testing.T, from, to *Node) {
	t.Helper()
	f := from.raft.LeadershipTransferToServer(raft.ServerID(to.cfg.NodeID), raft.ServerAddress(to.RaftAddr()))
	if err := f.Error(); err != nil {
		t.Fatalf("leadership transfer from %s to %s: %v", from.cfg.NodeID, to.cfg.NodeID, err)
	}
}

// TestStaleStretchCommitsNothingInALaterTerm: X's stretch of term T, still running after X was
// elected again in T+2, must neither commit (its decisions rest on a send log that lacks Y's
// renewals: a move of a worker's range could commit while Y's lease of it still runs) nor count
// a barrier committed in T+2 as a proof of its own leadership.
func TestStaleStretchCommitsNothingInALaterTerm(t *testing.T) {
	x, seam, old := reelectedUnnoticed(t)

	err := old.apply(&fsm.Pause{Ring: testRing, Reason: "stale stretch"})
	var paused bool
	x.fsm.View(func(s *fsm.State, _ uint64) {
		r := s.Ring(testRing)
		paused = r != nil && r.Controls != nil && r.Controls.Paused
	})
	if err == nil || paused {
		t.Fatalf("the stretch of term %d committed a pause in term %d (error %v, ring paused %v)",
			old.raftTerm, x.raft.CurrentTerm(), err, paused)
	}
	if old.ctx.Err() == nil {
		t.Error("the stretch of the earlier term still runs after its command was refused")
	}

	old.mu.Lock()
	before := old.verifiedUntil
	old.mu.Unlock()
	seam.thaw()
	proved := old.proveLeadership()
	old.mu.Lock()
	after := old.verifiedUntil
	old.mu.Unlock()
	if proved || !after.Equal(before) {
		t.Fatalf("a barrier committed in term %d proved the leadership of the stretch of term %d (proved %v, may send until %s, was %s)",
			x.raft.CurrentTerm(), old.raftTerm, proved, after.Format("15:04:05.000"), before.Format("15:04:05.000"))
	}
}

// TestNewRaftTermStartsANewLeadershipStretch: once X sees it leads in T+2, its stretch of T ends
// and a new one starts, with its own barrier and election time, so that it waits out what Y sent
// before it expires a hold.
func TestNewRaftTermStartsANewLeadershipStretch(t *testing.T) {
	x, seam, old := reelectedUnnoticed(t)
	old.mu.Lock()
	oldElectedAt := old.times.ElectedAt
	old.mu.Unlock()

	thawedAt := x.clock.Now()
	seam.thaw()
	var next *leaderTerm
	eventually(t, 10*time.Second, "a new leadership stretch after the term changed", func() bool {
		next = x.currentTerm()
		return next != nil && next != old && next.isReady()
	})
	if old.ctx.Err() == nil {
		t.Error("the stretch of the earlier term still runs: it would go on sending under its old proof of leadership")
	}
	if next.raftTerm != x.raft.CurrentTerm() {
		t.Errorf("new stretch of term %d, raft leads in %d", next.raftTerm, x.raft.CurrentTerm())
	}
	next.mu.Lock()
	electedAt := next.times.ElectedAt
	next.mu.Unlock()
	if !electedAt.After(thawedAt) || !electedAt.After(oldElectedAt) {
		t.Errorf("new stretch elected at %v, the term change was seen at %v (old stretch elected at %v): it must wait out the intervening leader's leases from its own election",
			electedAt, thawedAt, oldElectedAt)
	}
}
