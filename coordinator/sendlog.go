package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/leader"
)

// memberID names one member of one ring (leader.Member).
type memberID = leader.Member

// sendLog is the term's leader.Sends under a lock: the last time (coordinator clock, read before
// the element was written) an element of each member's epoch was sent. It is what lets the leader
// expire a hold: no element of epoch e sent at S can be in use after S + HolderBound.
//
// stamp reads the committed member and records the send under one lock, and the leader takes the
// same lock to copy the log for a pass (snapshot), after it read the rings: so a hold that the
// pass sees committed either has its latest send in the copy, or can no longer be sent (a hold's
// epoch is never current again, and a departed member gets nothing), and no send missing from the
// copy can make the pass expire a hold early.
type sendLog struct {
	mu   sync.Mutex
	sent leader.Sends
}

func newSendLog() *sendLog { return &sendLog{sent: leader.Sends{}} }

// stamp calls read under the log's lock; when it returns ok, the send of epoch at now is recorded
// before stamp returns, and the caller may write the element.
func (l *sendLog) stamp(now time.Time, read func() (m memberID, epoch uint64, ok bool)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, epoch, ok := read()
	if !ok {
		return false
	}
	l.sent.Record(m, epoch, now)
	return true
}

// snapshot copies the log for a reconcile pass (leader.Input.Sends).
func (l *sendLog) snapshot() leader.Sends {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Clone()
}

// last returns the latest send of exactly epoch.
func (l *sendLog) last(m memberID, epoch uint64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Last(m, epoch)
}

// prune forgets what the state no longer needs (leader.Sends.Prune).
func (l *sendLog) prune(keep func(m memberID) (lowest uint64, ok bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent.Prune(keep)
}
