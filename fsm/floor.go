package fsm

import (
	"fmt"
	"time"
)

// EpochFloor lifts every ring's epoch counter to at least Floor, for the rings that exist and
// for those created later (State.EpochFloor). The first leader of a freshly bootstrapped or of a
// recovered cluster commits one before any assignment: such a cluster may have lost entries that
// carried epochs already sent to workers (a recovered one lost its uncommitted tail, a
// re-bootstrapped one everything), and an epoch sent twice with two different contents would let
// a worker take an old assignment for the current one. docs/architecture.md, "Bootstrap and
// recovery", gives the argument; FloorAt the value.
//
// Settle marks the cluster as settling: every member's current assignment becomes a hold of its
// epoch (the assignment may have been superseded by an entry that was lost, so it is neither
// renewed nor trusted), and the leader assigns nothing until every lease of before may have
// ended; then it commits Settled, which ends the settling. Without either flag the entry only
// raises the floor (a cluster upgraded from FSM version 3, which lost nothing).
type EpochFloor struct {
	Floor   uint64 `json:"floor"`
	Settle  bool   `json:"settle,omitempty"`
	Settled bool   `json:"settled,omitempty"`
	// Reason is "bootstrap", "recover" or "upgrade", for people and logs.
	Reason string `json:"reason,omitempty"`
	// AtMs is the proposing leader's wall clock, Unix ms, for people.
	AtMs int64 `json:"at_ms"`
}

// Type implements Command.
func (EpochFloor) Type() CommandType { return TypeEpochFloor }

// FloorAt is the epoch floor a leader proposes at wall-clock time now, on state s: the wall clock
// in microseconds since the Unix epoch, and above every epoch the state still knows. Why
// microseconds: a ring's epoch counter grows by one per member per committed assignment, each an
// fsync'd Raft entry at least PassInterval after the previous pass, so it cannot gain a million a
// second on a ring; an earlier floor, taken from an earlier clock reading, plus every epoch
// assigned since stays below a later reading. The value stays below 2^53 (exact in a JavaScript
// number) until the year 2255.
func FloorAt(now time.Time, s *State) uint64 {
	floor := uint64(max(now.UnixMicro(), 1))
	floor = max(floor, s.EpochFloor+1)
	for _, r := range s.Rings {
		floor = max(floor, r.LastEpoch+1)
	}
	return floor
}

func (c *EpochFloor) validate() error {
	switch {
	case c.Floor == 0:
		return fmt.Errorf("%w: epoch floor 0", ErrMalformed)
	case c.Settle && c.Settled:
		return fmt.Errorf("%w: epoch floor both starts and ends the settling", ErrMalformed)
	}
	return nil
}

// applyEpochFloor is idempotent: the floor only rises, a member already turned into holds has
// no current assignment left to turn, and Settled clears a flag.
func (s *State) applyEpochFloor(c *EpochFloor) error {
	if err := c.validate(); err != nil {
		return err
	}
	s.EpochFloor = max(s.EpochFloor, c.Floor)
	for _, r := range s.Rings {
		r.LastEpoch = max(r.LastEpoch, s.EpochFloor)
	}
	switch {
	case c.Settled:
		s.Settling = false
	case c.Settle:
		s.Settling = true
		for _, r := range s.Rings {
			for _, m := range r.Members {
				if !m.Assigned() {
					continue
				}
				r.Generation++
				h := Hold{Epoch: m.Epoch, Ranges: m.Ranges, Node0: m.IsNode0()}
				if !h.Ranges.Empty() || h.Node0 {
					m.Holds = append(m.Holds, h)
				}
				m.Epoch, m.NodeIndex, m.NodeCount, m.Ranges = 0, -1, 0, nil
				forgetIfIdle(r, m)
			}
		}
	}
	return nil
}
