package coordinator

import (
	"sort"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// termTimes are the instants and bounds of one leadership term that the leader's decisions use.
type termTimes struct {
	// electedAt is when this node, as leader, had applied every earlier entry (after Barrier).
	electedAt time.Time
	// leaderLease is Raft's leader lease timeout: an earlier leader sent nothing later than this
	// after proposing the last entry of its term that a quorum stored (leaderTerm.canSend), a
	// proposal that precedes this leader's election, hence electedAt plus this.
	leaderLease time.Duration
	// holderBound is this leader's lease.Timing.HolderBound, TTL×(1+ρ) + margin: the bound of
	// every lease it sends itself.
	holderBound time.Duration
	// inheritedBound bounds the leases earlier leaders may have sent: the holder bound of the
	// longest timing committed to the state (TimingState.Longest), at least holderBound. A
	// rolling restart onto a shorter TTL thus never expires a lease of the longer one early.
	inheritedBound time.Duration
	// graceEnd is electedAt + SilenceTimeout + ReconnectGrace: the least time workers get to find
	// the new leader (downAfter).
	graceEnd time.Time
}

// holdsAliveUntil is the earliest instant at which a new leader may expire anything: it does not
// know when the previous leaders last sent, only that they stopped by electedAt + leaderLease,
// under a timing no longer than the longest committed one.
func (t termTimes) holdsAliveUntil() time.Time {
	return t.electedAt.Add(t.leaderLease).Add(t.inheritedBound)
}

// downAfter is when a committed member that has not come back to this leader is committed down:
// once its last lease, sent by an earlier leader, may have ended (holdsAliveUntil), and not before
// the reconnect grace ends. Why not at graceEnd alone: a member still holding a valid lease is at
// work, merely looking for the new leader (with the default TTL of 10 s its lease outlives a
// 2.75 s grace by seconds); downing it would rebalance its ring under every member, and a failover
// alone must change no assignment. Waiting costs no coverage: its tokens could not move before
// holdsAliveUntil anyway. It is a method, not a field, because inheritedBound is settled after
// the barrier (leaderTerm.settleTiming).
func (t termTimes) downAfter() time.Time {
	if h := t.holdsAliveUntil(); h.After(t.graceEnd) {
		return h
	}
	return t.graceEnd
}

// decideRetire lowers the longest committed timing to the leader's own once no lease sent under
// it can be in use: the leader committed its own timing (ts.InForce), every earlier leader sent
// its last lease before electedAt + leaderLease, and that lease is no longer in use past its
// holder bound. Until then it returns when that becomes due. Later leaders then wait out this
// leader's own bound only, so a shorter TTL costs one long wait, not one per election.
func decideRetire(now time.Time, tt termTimes, ts *fsm.TimingState, own fsm.LeaseTiming) (*fsm.RetireTiming, time.Time) {
	if ts == nil || ts.InForce != own || ts.Longest == own || ts.Longest.HolderBound() <= own.HolderBound() {
		return nil, time.Time{}
	}
	due := tt.electedAt.Add(tt.leaderLease).Add(ts.Longest.HolderBound())
	if !now.After(due) {
		return nil, due.Add(time.Nanosecond)
	}
	return &fsm.RetireTiming{Retire: ts.Longest, Keep: own}, time.Time{}
}

// connState is what the leader knows of a member's connection to it.
type connState struct {
	ring lease.RingKey
	// live: a connection is open and its lease stream has not ended.
	live bool
	// streaming: the lease stream is subscribed; the member wants to be active.
	streaming bool
}

// ringDecisions are the commands the leader should propose for one ring before planning.
type ringDecisions struct {
	joins   []fsm.Join
	downs   []fsm.Down
	expires []fsm.Expire
	// wake is when a decision that is not due yet becomes due (zero: nothing pending).
	wake time.Time
	// holdPlan: no assignment on this pass (a bootstrapped or recovered state settling).
	holdPlan bool
}

// decideRing is the leader's failure detection and hold expiry for one ring, as a pure function of
// the committed ring, the connections and the send log:
//   - a streaming connection whose member is missing or inactive joins (the same incarnation
//     continues what it holds; a new one supersedes the old);
//   - an active member with no live connection is down once downAfter has passed, and not
//     before, whether or not it came back in this term: it may still be looking for the new
//     leader with a valid lease, and a failover alone changes no assignment. Past that window a
//     lost connection is a Down at the next pass, so a crash is detected at once;
//   - a pending hold expires once now is past both holdsAliveUntil and the latest send of any
//     epoch up to the hold's plus the holder bound. One Expire per member, up to the highest
//     epoch that is due: sent epochs only grow, so due holds are the member's oldest.
func decideRing(now time.Time, tt termTimes, ringID string, r *fsm.Ring, conns map[memberID]connState,
	lastUpTo func(m memberID, epoch uint64) (time.Time, bool)) ringDecisions {
	var d ringDecisions
	later := func(t time.Time) {
		if d.wake.IsZero() || t.Before(d.wake) {
			d.wake = t
		}
	}

	var streaming []memberID
	for m, cs := range conns {
		if m.Ring == ringID && cs.streaming {
			streaming = append(streaming, m)
		}
	}
	sort.Slice(streaming, func(i, j int) bool { return streaming[i].key() < streaming[j].key() })
	for _, m := range streaming {
		if mm := r.Members[m.key()]; mm == nil || !mm.Active {
			d.joins = append(d.joins, fsm.Join{Ring: r.Key, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
		}
	}

	for _, mm := range r.SortedMembers() {
		m := memberID{Ring: ringID, WorkerID: mm.WorkerID, Incarnation: mm.Incarnation}
		if !mm.Active || conns[m].live {
			continue
		}
		// Within the reconnect window nobody is downed, not even a member that came back to this
		// leader and lost its connection again: right after a failover a thousand workers
		// reconnect at once, and on a busy leader some of those fresh connections drop again
		// (measured with bench/swarm: 38 of 100 rings rebalanced after one leader kill, every Down
		// within 7 s of the election). Their leases, from this leader or an earlier one, live on;
		// a Down would only replan the ring under every member. Past the window a member is
		// down as soon as its connection is gone: a crash is detected at once.
		if !now.Before(tt.downAfter()) {
			d.downs = append(d.downs, fsm.Down{Ring: r.Key, WorkerID: mm.WorkerID, Incarnation: mm.Incarnation})
		} else {
			later(tt.downAfter())
		}
	}

	floor := tt.holdsAliveUntil()
	upTo := map[memberID]uint64{}
	var order []memberID
	for _, h := range fsm.PendingHolds(r) {
		m := memberID{Ring: ringID, WorkerID: h.WorkerID, Incarnation: h.Incarnation}
		due := floor
		if last, ok := lastUpTo(m, h.Epoch); ok && last.Add(tt.holderBound).After(due) {
			due = last.Add(tt.holderBound)
		}
		if !now.After(due) {
			later(due.Add(time.Nanosecond))
			continue
		}
		if _, ok := upTo[m]; !ok {
			order = append(order, m)
		}
		if h.Epoch > upTo[m] {
			upTo[m] = h.Epoch
		}
	}
	for _, m := range order {
		// Generation: a member that became active again after this decision (a reconnect, whose
		// renewals the log has not weighed here) is not expired by it.
		d.expires = append(d.expires, fsm.Expire{Ring: r.Key, WorkerID: m.WorkerID, Incarnation: m.Incarnation,
			UpTo: upTo[m], Generation: r.Generation})
	}
	return d
}

// decideHandOns is the return delay of a minimal-mode ring (fsm.HandOn): a slot reserved for a
// worker id that may come back is handed on once this term has seen it reserved for the ring's
// ReturnDelay (a replicated parameter of the setting). The state keeps no time, and this leader does not know when an earlier one saw the
// reservation begin: seen is when this term first saw it, so a failover lengthens a pending delay
// by at most one delay, and never shortens it. A ring with no eligible member hands nothing on
// (nobody could take it), but its delays run. It returns when the next hand-on not yet due becomes due.
func decideHandOns(now time.Time, r *fsm.Ring, seen func(fsm.Slot) time.Time) ([]fsm.HandOn, time.Time) {
	slots := r.Reservations()
	if len(slots) == 0 {
		return nil, time.Time{}
	}
	delay := r.Movement.Config().ReturnDelay
	var out []fsm.HandOn
	var wake time.Time
	for _, s := range slots {
		due := seen(s).Add(delay) // seen first: the delay counts while nobody could take it too
		if len(r.EligibleMembers()) == 0 {
			continue
		}
		if now.Before(due) {
			if wake.IsZero() || due.Before(wake) {
				wake = due
			}
			continue
		}
		out = append(out, fsm.HandOn{Ring: r.Key, WorkerID: s.WorkerID, Generation: r.Generation})
	}
	return out, wake
}

// decideEvenOut is the idle even-out of a minimal-mode ring (fsm.EvenOut): once this term has seen
// the ring settled (no membership change, nothing reserved, no step in flight) at its generation
// and step for the setting's idle time, and its target is not even yet, it proposes the next
// step. The idle time is also the steps' spacing: StepMoves moves per idle time is the even-out's
// churn budget (a step that must cross more members, N−1, moves more, once), replicated with the
// setting so that every leader spends the same. seen is when this term first saw the ring so, as
// for decideHandOns.
func decideEvenOut(now time.Time, r *fsm.Ring, seen func() time.Time) (*fsm.EvenOut, time.Time) {
	if r.Movement == nil || !r.Settled() || len(r.Reservations()) > 0 || r.EvenedOut() {
		return nil, time.Time{}
	}
	if due := seen().Add(r.Movement.Config().Idle); now.Before(due) {
		return nil, due
	}
	return &fsm.EvenOut{Ring: r.Key, Generation: r.Generation, Step: r.Movement.EvenOutSteps}, time.Time{}
}
