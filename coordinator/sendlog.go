package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/fsm"
)

// memberID names one member of one ring: the ring's fsm.RingID and the member's worker id and
// incarnation.
type memberID struct {
	Ring        string
	WorkerID    string
	Incarnation string
}

func (m memberID) key() string { return fsm.MemberKey(m.WorkerID, m.Incarnation) }

// sendLog remembers, for the current leadership term, the last time (coordinator clock, read
// before the element was written) an element of each member's epoch was sent. It is what lets the
// leader expire a hold: no element of epoch e sent at S can be in use after S + HolderBound.
//
// stamp reads the committed member and records the send under one lock, and the leader takes the
// same lock to read the log: so a hold that the leader saw in the committed state either has its
// latest send in the log, or can no longer be sent (a hold's epoch is never current again, and a
// departed member gets nothing).
type sendLog struct {
	mu   sync.Mutex
	sent map[memberID]map[uint64]time.Time
}

func newSendLog() *sendLog { return &sendLog{sent: map[memberID]map[uint64]time.Time{}} }

// stamp calls read under the log's lock; when it returns ok, the send of epoch at now is recorded
// before stamp returns, and the caller may write the element.
func (l *sendLog) stamp(now time.Time, read func() (m memberID, epoch uint64, ok bool)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, epoch, ok := read()
	if !ok {
		return false
	}
	byEpoch := l.sent[m]
	if byEpoch == nil {
		byEpoch = map[uint64]time.Time{}
		l.sent[m] = byEpoch
	}
	if now.After(byEpoch[epoch]) {
		byEpoch[epoch] = now
	}
	return true
}

// view runs fn with the log locked; fn gets a reader of the latest send of any epoch up to epoch.
func (l *sendLog) view(fn func(lastUpTo func(m memberID, epoch uint64) (time.Time, bool))) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(func(m memberID, epoch uint64) (time.Time, bool) {
		var last time.Time
		found := false
		for e, at := range l.sent[m] {
			if e <= epoch && (!found || at.After(last)) {
				last, found = at, true
			}
		}
		return last, found
	})
}

// last returns the latest send of exactly epoch.
func (l *sendLog) last(m memberID, epoch uint64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.sent[m][epoch]
	return at, ok
}

// prune forgets members the state no longer has and, for the others, sends of epochs below the
// lowest one the state still needs, except the latest of those: a member's sent epochs only grow,
// and lastUpTo of a needed epoch that was never sent itself is the latest older send.
func (l *sendLog) prune(keep func(m memberID) (lowest uint64, ok bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for m, byEpoch := range l.sent {
		lowest, ok := keep(m)
		if !ok {
			delete(l.sent, m)
			continue
		}
		var below uint64
		for e := range byEpoch {
			if e < lowest && e > below {
				below = e
			}
		}
		for e := range byEpoch {
			if e < below {
				delete(byEpoch, e)
			}
		}
	}
}
