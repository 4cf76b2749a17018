package leader

import (
	"sort"
	"time"

	"github.com/retryring/retryring/fsm"
)

// RingDecisions are the commands the leader should propose for one ring before planning.
type RingDecisions struct {
	Joins   []fsm.Join
	Downs   []fsm.Down
	Expires []fsm.Expire
	// Wake is when a decision that is not due yet becomes due (zero: nothing pending).
	Wake time.Time
	// HoldPlan: no assignment on this pass (a bootstrapped or recovered state settling).
	HoldPlan bool
}

// Commands are the decisions in the order a pass applies them: joins, downs, expiries.
func (d RingDecisions) Commands() []fsm.Command {
	var out []fsm.Command
	for i := range d.Joins {
		out = append(out, &d.Joins[i])
	}
	for i := range d.Downs {
		out = append(out, &d.Downs[i])
	}
	for i := range d.Expires {
		out = append(out, &d.Expires[i])
	}
	return out
}

// DecideRing is the leader's failure detection and hold expiry for one ring, as a function of
// the committed ring, the connections and the send log:
//   - a streaming connection whose member is missing or inactive joins (the same incarnation
//     continues what it holds; a new one supersedes the old);
//   - an active member with no live connection is down once DownAfter has passed, and not
//     before, whether or not it came back in this term: it may still be looking for the new
//     leader with a valid lease, and a failover alone changes no assignment. Past that window a
//     lost connection is a Down at the next pass, so a crash is detected at once;
//   - a pending hold expires once now is past both HoldsAliveUntil and the latest send of any
//     epoch up to the hold's plus the holder bound. One Expire per member, up to the highest
//     epoch that is due: sent epochs only grow, so due holds are the member's oldest.
func DecideRing(now time.Time, tt Times, ringID string, r *fsm.Ring, conns map[Member]Conn, sends Sends) RingDecisions {
	var d RingDecisions
	later := func(t time.Time) {
		if d.Wake.IsZero() || t.Before(d.Wake) {
			d.Wake = t
		}
	}

	var streaming []Member
	for m, cs := range conns {
		if m.Ring == ringID && cs.Streaming {
			streaming = append(streaming, m)
		}
	}
	sort.Slice(streaming, func(i, j int) bool { return streaming[i].Key() < streaming[j].Key() })
	for _, m := range streaming {
		if mm := r.Members[m.Key()]; mm == nil || !mm.Active {
			d.Joins = append(d.Joins, fsm.Join{Ring: r.Key, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
		}
	}

	for _, mm := range r.SortedMembers() {
		m := Member{Ring: ringID, WorkerID: mm.WorkerID, Incarnation: mm.Incarnation}
		if !mm.Active || conns[m].Live {
			continue
		}
		// Within the reconnect window nobody is downed, not even a member that came back to this
		// leader and lost its connection again: right after a failover a thousand workers
		// reconnect at once, and on a busy leader some of those fresh connections drop again
		// (measured with bench/swarm: 38 of 100 rings rebalanced after one leader kill, every Down
		// within 7 s of the election). Their leases, from this leader or an earlier one, live on;
		// a Down would only replan the ring under every member. Past the window a member is
		// down as soon as its connection is gone: a crash is detected at once.
		if !now.Before(tt.DownAfter()) {
			d.Downs = append(d.Downs, fsm.Down{Ring: r.Key, WorkerID: mm.WorkerID, Incarnation: mm.Incarnation})
		} else {
			later(tt.DownAfter())
		}
	}

	floor := tt.HoldsAliveUntil()
	upTo := map[Member]uint64{}
	var order []Member
	for _, h := range fsm.PendingHolds(r) {
		m := Member{Ring: ringID, WorkerID: h.WorkerID, Incarnation: h.Incarnation}
		due := floor
		if last, ok := sends.LastUpTo(m, h.Epoch); ok && last.Add(tt.HolderBound).After(due) {
			due = last.Add(tt.HolderBound)
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
		d.Expires = append(d.Expires, fsm.Expire{Ring: r.Key, WorkerID: m.WorkerID, Incarnation: m.Incarnation,
			UpTo: upTo[m], Generation: r.Generation})
	}
	return d
}
