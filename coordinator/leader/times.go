package leader

import (
	"time"

	"github.com/retryring/retryring/fsm"
)

// Times are the instants and bounds of one leadership term that the leader's decisions use.
type Times struct {
	// ElectedAt is when this node, as leader, had applied every earlier entry (after Barrier).
	ElectedAt time.Time
	// LeaderLease is Raft's leader lease timeout: an earlier leader sent nothing later than this
	// after proposing the last entry of its term that a quorum stored (the coordinator's
	// leaderTerm.canSend), a proposal that precedes this leader's election, hence ElectedAt plus
	// this.
	LeaderLease time.Duration
	// HolderBound is this leader's lease.Timing.HolderBound, TTL×(1+ρ) + margin: the bound of
	// every lease it sends itself.
	HolderBound time.Duration
	// InheritedBound bounds the leases earlier leaders may have sent: the holder bound of the
	// longest timing committed to the state (TimingState.Longest), at least HolderBound. A
	// rolling restart onto a shorter TTL thus never expires a lease of the longer one early.
	InheritedBound time.Duration
	// GraceEnd is ElectedAt + SilenceTimeout + ReconnectGrace: the least time workers get to find
	// the new leader (DownAfter).
	GraceEnd time.Time
}

// HoldsAliveUntil is the earliest instant at which a new leader may expire anything: it does not
// know when the previous leaders last sent, only that they stopped by ElectedAt + LeaderLease,
// under a timing no longer than the longest committed one.
func (t Times) HoldsAliveUntil() time.Time {
	return t.ElectedAt.Add(t.LeaderLease).Add(t.InheritedBound)
}

// DownAfter is when a committed member that has not come back to this leader is committed down:
// once its last lease, sent by an earlier leader, may have ended (HoldsAliveUntil), and not before
// the reconnect grace ends. Why not at GraceEnd alone: a member still holding a valid lease is at
// work, merely looking for the new leader (with the default TTL of 10 s its lease outlives a
// 2.75 s grace by seconds); downing it would rebalance its ring under every member, and a failover
// alone must change no assignment. Waiting costs no coverage: its tokens could not move before
// HoldsAliveUntil anyway. It is a method, not a field, because InheritedBound is settled after
// the barrier (the coordinator's leaderTerm.settleTiming).
func (t Times) DownAfter() time.Time {
	if h := t.HoldsAliveUntil(); h.After(t.GraceEnd) {
		return h
	}
	return t.GraceEnd
}

// DecideRetire lowers the longest committed timing to the leader's own once no lease sent under
// it can be in use: the leader committed its own timing (ts.InForce), every earlier leader sent
// its last lease before ElectedAt + LeaderLease, and that lease is no longer in use past its
// holder bound. Until then it returns when that becomes due. Later leaders then wait out this
// leader's own bound only, so a shorter TTL costs one long wait, not one per election.
func DecideRetire(now time.Time, tt Times, ts *fsm.TimingState, own fsm.LeaseTiming) (*fsm.RetireTiming, time.Time) {
	if ts == nil || ts.InForce != own || ts.Longest == own || ts.Longest.HolderBound() <= own.HolderBound() {
		return nil, time.Time{}
	}
	due := tt.ElectedAt.Add(tt.LeaderLease).Add(ts.Longest.HolderBound())
	if !now.After(due) {
		return nil, due.Add(time.Nanosecond)
	}
	return &fsm.RetireTiming{Retire: ts.Longest, Keep: own}, time.Time{}
}
