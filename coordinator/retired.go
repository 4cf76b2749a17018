package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/fsm"
)

// retiredFor is how long a superseded incarnation is remembered after it was last seen in the
// replicated state: far longer than any lease, so that a process that was stopped (SIGSTOP, a long
// GC pause, a partition) and comes back finds its place taken for good.
const retiredFor = 24 * time.Hour

// retiredSet remembers incarnations that a newer incarnation of the same worker id superseded.
//
// The replicated state makes the last Join win. Two live processes with one worker id (a zombie
// that came back after its replacement started, or a misconfiguration) would then take the ring
// from each other forever, each reconnect superseding the other. The coordinator breaks the tie
// for the newer one: join order in the state says which incarnation is newer, and this set keeps
// knowing it after the superseded member left the state (once its lease expired). Every node keeps
// it from the state it applies, so a new leader knows it too, as long as it was running when the
// supersede happened. A superseded incarnation may still release or leave; it cannot stream.
type retiredSet struct {
	mu   sync.Mutex
	seen map[memberID]time.Time
}

func newRetiredSet() *retiredSet { return &retiredSet{seen: map[memberID]time.Time{}} }

// note records, from the state, every member that is not the newest incarnation of its worker id;
// it reports whether one of them was not known before.
func (r *retiredSet) note(s *fsm.State, now time.Time) (grew bool) {
	var retired []memberID
	for ringID, ring := range s.Rings {
		newest := map[string]*fsm.Member{}
		for _, m := range ring.Members {
			if cur := newest[m.WorkerID]; cur == nil || m.JoinSeq > cur.JoinSeq {
				newest[m.WorkerID] = m
			}
		}
		for _, m := range ring.Members {
			if newest[m.WorkerID] != m {
				retired = append(retired, memberID{Ring: ringID, WorkerID: m.WorkerID, Incarnation: m.Incarnation})
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range retired {
		if _, known := r.seen[m]; !known {
			grew = true
		}
		r.seen[m] = now
	}
	for m, at := range r.seen {
		if now.Sub(at) > retiredFor {
			delete(r.seen, m)
		}
	}
	return grew
}

// mayShowASupersede reports whether the state after applying c (nil: a restored snapshot) may show
// an incarnation superseded that the state before did not: only a join adds an incarnation, so
// only an entry that joins one can. note scans every member of every ring under the FSM's write
// lock: on every entry that would be O(members) per release, expire and assignment, which a join
// storm of a thousand workers makes O(members²). The times note keeps need no other refresh: a
// superseded member stays in the state only until its lease ends, far within retiredFor.
func mayShowASupersede(c fsm.Command) bool {
	switch c := c.(type) {
	case nil, *fsm.Join:
		return true
	case *fsm.Reconcile:
		return len(c.Joins) > 0
	}
	return false
}

func (r *retiredSet) has(m memberID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.seen[m]
	return ok
}
