package coordinator

import (
	"sync/atomic"
	"testing"
	"time"
)

// shiftedTerm reports Raft's state as it is and its term shifted by what the test adds: a
// step-down and a re-election that both happened between two polls of syncLeadership, with no
// observation in between (the observer channel drops them when full).
type shiftedTerm struct {
	raftLeadership
	shift atomic.Uint64
}

func (s *shiftedTerm) CurrentTerm() uint64 { return s.raftLeadership.CurrentTerm() + s.shift.Load() }

// TestNewRaftTermStartsANewLeadershipStretch: a node that leads in term 5 at one poll and in term 7
// at the next led nothing it knows of in between; another leader may have sent leases in term 6.
// Its stretch of term 5 ends and a new one starts, with its own barrier and election time, so
// that it waits out what the intervening leader sent before it expires a hold.
func TestNewRaftTermStartsANewLeadershipStretch(t *testing.T) {
	var fake *shiftedTerm
	c := newCluster(t, 1, func(_ int, cfg *Config) {
		cfg.leadership = func(r raftLeadership) raftLeadership {
			fake = &shiftedTerm{raftLeadership: r}
			return fake
		}
	})
	leader := c.leader()
	old := leader.currentTerm()
	old.mu.Lock()
	oldElectedAt := old.times.electedAt
	old.mu.Unlock()

	shiftedAt := leader.clock.Now()
	fake.shift.Store(2)
	var next *leaderTerm
	eventually(t, 5*time.Second, "a new leadership stretch after the term changed", func() bool {
		next = leader.currentTerm()
		return next != nil && next != old && next.isReady()
	})
	if old.ctx.Err() == nil {
		t.Error("the stretch of the earlier term still runs: it would go on sending under its old proof of leadership")
	}
	next.mu.Lock()
	electedAt := next.times.electedAt
	next.mu.Unlock()
	if !electedAt.After(shiftedAt) || !electedAt.After(oldElectedAt) {
		t.Errorf("new stretch elected at %v, the term changed at %v (old stretch elected at %v): it must wait out the intervening leader's leases from its own election",
			electedAt, shiftedAt, oldElectedAt)
	}
}
