package leader

import "time"

// Sends is the send log of one leadership term: for each member, the last time (the leader's
// clock, read before the element was written) an element of each of its epochs was sent. It is
// what lets the leader expire a hold: no element of epoch e sent at S is in use after
// S + HolderBound. Sends is a plain value; the coordinator keeps it under the lock that makes
// reading a member's epoch and recording its send one step (coordinator/sendlog.go), and hands
// Step a copy taken under that lock.
type Sends map[Member]map[uint64]time.Time

// Record notes a send of epoch to m at at (a later send of the same epoch wins).
func (s Sends) Record(m Member, epoch uint64, at time.Time) {
	byEpoch := s[m]
	if byEpoch == nil {
		byEpoch = map[uint64]time.Time{}
		s[m] = byEpoch
	}
	if at.After(byEpoch[epoch]) {
		byEpoch[epoch] = at
	}
}

// LastUpTo is the latest send to m of any epoch up to epoch: a hold of epoch e is in use as long
// as an element of e or of an older epoch (whose ranges e's hold covers) may be.
func (s Sends) LastUpTo(m Member, epoch uint64) (time.Time, bool) {
	var last time.Time
	found := false
	for e, at := range s[m] {
		if e <= epoch && (!found || at.After(last)) {
			last, found = at, true
		}
	}
	return last, found
}

// Last is the latest send to m of exactly epoch.
func (s Sends) Last(m Member, epoch uint64) (time.Time, bool) {
	at, ok := s[m][epoch]
	return at, ok
}

// Clone copies the log, for a Step that must not see later sends.
func (s Sends) Clone() Sends {
	out := make(Sends, len(s))
	for m, byEpoch := range s {
		c := make(map[uint64]time.Time, len(byEpoch))
		for e, at := range byEpoch {
			c[e] = at
		}
		out[m] = c
	}
	return out
}

// Prune forgets members the state no longer has and, for the others, sends of epochs below the
// lowest one the state still needs, except the latest of those: a member's sent epochs only
// grow, and LastUpTo of a needed epoch that was never sent itself is the latest older send.
func (s Sends) Prune(keep func(m Member) (lowest uint64, ok bool)) {
	for m, byEpoch := range s {
		lowest, ok := keep(m)
		if !ok {
			delete(s, m)
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
