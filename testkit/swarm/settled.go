package swarm

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// Settled reports whether every ring of the swarm is at rest in the leader's view v at now: its
// members are exactly the swarm's clients of that ring (in their running incarnations), at rest
// (admin.RingStateView.AtRest), and each client's guard holds that very assignment (same epoch,
// same ranges), still valid at now. The reason names the first ring that is not, and why.
func (s *Swarm) Settled(v admin.RingView, now time.Time) (bool, string) {
	byRing := map[lease.RingKey][]*Member{}
	for _, m := range s.members {
		byRing[m.Ring] = append(byRing[m.Ring], m)
	}
	for _, ring := range s.rings {
		if ok, why := settledRing(v, ring, byRing[ring], now); !ok {
			return false, fmt.Sprintf("ring %s: %s", ring, why)
		}
	}
	return true, ""
}

// SettledRings counts the rings of the swarm that are settled in v at now.
func (s *Swarm) SettledRings(v admin.RingView, now time.Time) int {
	byRing := map[lease.RingKey][]*Member{}
	for _, m := range s.members {
		byRing[m.Ring] = append(byRing[m.Ring], m)
	}
	n := 0
	for _, ring := range s.rings {
		if ok, _ := settledRing(v, ring, byRing[ring], now); ok {
			n++
		}
	}
	return n
}

func settledRing(v admin.RingView, ring lease.RingKey, members []*Member, now time.Time) (bool, string) {
	r, ok := v.Ring(ring)
	if !ok {
		return false, "not in the view"
	}
	running := make(map[string]string, len(members))
	for _, m := range members {
		running[m.ID] = m.client.Incarnation()
	}
	if err := r.AtRest(running); err != nil {
		return false, err.Error()
	}
	byID := make(map[string]admin.MemberView, len(r.Members))
	for _, mv := range r.Members {
		byID[mv.WorkerID] = mv
	}
	for _, m := range members {
		mv := byID[m.ID]
		l, ok := m.client.Current()
		if !ok {
			return false, fmt.Sprintf("%s holds no lease", m.ID)
		}
		want, _ := lease.DecodeRanges(mv.Ranges)
		if l.Epoch != mv.Epoch || !l.Ranges.Equal(want) || !l.ExpiresAt().After(now) {
			return false, fmt.Sprintf("%s holds epoch %d, the leader assigned epoch %d", m.ID, l.Epoch, mv.Epoch)
		}
	}
	return true, ""
}
