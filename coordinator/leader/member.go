package leader

import (
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Member names one member of one ring: the ring's fsm.RingID and the member's worker id and
// incarnation.
type Member struct {
	Ring        string
	WorkerID    string
	Incarnation string
}

// Key is the member's key in fsm.Ring.Members.
func (m Member) Key() string { return fsm.MemberKey(m.WorkerID, m.Incarnation) }

// Conn is what the leader knows of a member's connection to it.
type Conn struct {
	Ring lease.RingKey
	// Live: a connection is open and its lease stream has not ended.
	Live bool
	// Streaming: the lease stream is subscribed; the member wants to be active.
	Streaming bool
}
