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
// anything while the state is settling until its own holdsAliveUntil has passed; then it commits
// Settled. A leader that dies meanwhile leaves the state settling, and the next one waits from
// its own, later, election.

// settleFloor commits the epoch floor at the start of a term, before the term is ready (nothing
// is sent before): with Settle when the state is new or this node was just recovered, without
// when the state merely predates FSM version 4 (an upgraded cluster lost nothing). The version
// gate may keep it out: a server registered an older version (the floor comes once the upgrade
// is done, decideFloor), or a server has not registered yet, for which it waits up to
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

// decideFloor is the floor to commit on this pass: once a rolling upgrade from FSM version 3 has
// finished, the state gets its first floor (no settling: it lost nothing).
func (t *leaderTerm) decideFloor(now time.Time) fsm.Command {
	var c *fsm.EpochFloor
	t.mu.Lock()
	local := t.settleLocal
	t.mu.Unlock()
	t.n.fsm.View(func(s *fsm.State, _ uint64) {
		if s.EpochFloor == 0 {
			// A term still settling on its own (the gate kept its floor out at the start) carries
			// the settling into the replicated state with the floor, so that a next leader settles
			// too rather than assign at once.
			c = &fsm.EpochFloor{Floor: fsm.FloorAt(now, s), Settle: local, Reason: "upgrade", AtMs: now.UnixMilli()}
			if local {
				c.Reason = "bootstrap"
			}
		}
	})
	if c == nil || t.n.versionGate(c) != nil {
		return nil
	}
	return c
}

// settling reports whether this pass must hold every plan back: the state (or this term, see
// settleFloor) is settling and holdsAliveUntil has not passed. Once it has, it returns the
// Settled entry to commit before planning.
func (t *leaderTerm) settling(now time.Time, times termTimes) (hold bool, settled fsm.Command, wake time.Time) {
	var inState bool
	var floor uint64
	t.n.fsm.View(func(s *fsm.State, _ uint64) { inState, floor = s.Settling, s.EpochFloor })
	t.mu.Lock()
	local := t.settleLocal
	t.mu.Unlock()
	if !inState && !local {
		return false, nil, time.Time{}
	}
	if until := times.holdsAliveUntil(); !now.After(until) {
		return true, nil, until.Add(time.Nanosecond)
	}
	t.mu.Lock()
	t.settleLocal = false
	t.mu.Unlock()
	if inState {
		return false, &fsm.EpochFloor{Floor: floor, Settled: true, AtMs: now.UnixMilli()}, time.Time{}
	}
	return false, nil, time.Time{}
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
