package coordinator

import (
	"errors"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/wallclock"
)

// Bootstrap and recovery (docs/architecture.md, "Bootstrap and recovery"). A cluster whose state
// is new (bootstrapped with nothing in it) or recovered (raft.RecoverCluster on what one node
// kept) may have workers that still hold leases the state does not know: sent by the cluster
// before it was rebuilt, or by entries the recovery lost. Its first leader therefore commits an
// epoch floor (fsm.EpochFloor) with Settle before it does anything else, and no leader assigns
// anything while the state is settling until its own Times.HoldsAliveUntil has passed; then it
// commits Settled (leader.Step decides both, and the first floor of an upgraded state). A leader that dies meanwhile leaves the state settling, and the next one waits from
// its own, later, election.

// settleFloor commits the epoch floor at the start of a term, before the term is ready (nothing
// is sent before): with Settle when the state is new or this node was just recovered, without
// when the state merely predates FSM version 4 (an upgraded cluster lost nothing). The version
// gate may keep it out: a server registered an older version (the floor comes once the upgrade
// is done, leader.Step), or a server has not registered yet, for which it waits up to
// ReconnectGrace; a new or recovered state then settles in this term alone (settleLocal). It
// reports false when the term ended first.
func (t *leaderTerm) settleFloor() bool {
	recovered := t.n.recoveredMarker()
	waitUntil := t.n.clock.Now().Add(t.n.cfg.ReconnectGrace)
	for {
		now := t.n.clock.Now()
		var have, floor uint64
		var fresh bool
		t.n.fsm.View(func(s *fsm.State, _ uint64) {
			have, fresh, floor = s.EpochFloor, s.EpochFloor == 0 && noEpochYet(s), fsm.FloorAt(now, s)
		})
		if have > 0 && !recovered {
			return true
		}
		c := &fsm.EpochFloor{Floor: floor, Settle: recovered || (fresh && !t.n.cfg.trustFreshState), AtMs: now.UnixMilli()}
		switch {
		case recovered:
			c.Reason = "recover"
		case fresh:
			c.Reason = "bootstrap"
		default:
			c.Reason = "upgrade"
		}
		err := t.apply(c)
		if err == nil {
			if recovered {
				t.n.clearRecoveredMarker()
			}
			t.log.Info().Uint64("epoch_floor", floor).Str("reason", c.Reason).Bool("settle", c.Settle).Msg("epoch floor committed")
			return true
		}
		if errors.Is(err, ErrUpgradeIncomplete) && (t.n.anyRegisteredBelow(fsm.TypeEpochFloor.Since()) || !now.Before(waitUntil)) {
			t.log.Warn().Err(err).Msg("epoch floor not committed: epochs continue from the state's counters until every coordinator runs FSM version 4")
			if c.Settle {
				t.mu.Lock()
				t.settleLocal = true
				t.mu.Unlock()
			}
			return true
		}
		if !wallclock.Sleep(t.ctx, 50*time.Millisecond) {
			return false
		}
	}
}

// noEpochYet reports whether no ring of s was ever assigned an epoch: the state holds nothing a
// cluster has sent, as after a bootstrap, even if workers joined while a first leader settled it
// on its own (rings exist, nothing was assigned).
func noEpochYet(s *fsm.State) bool {
	for _, r := range s.Rings {
		if r.LastEpoch > 0 {
			return false
		}
	}
	return true
}

// epochFloor is the floor a ring created now starts from.
func (n *Node) epochFloor() uint64 {
	var f uint64
	n.fsm.View(func(s *fsm.State, _ uint64) { f = s.EpochFloor })
	return f
}
