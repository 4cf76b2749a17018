package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
)

// annotate adds to v every member's report and every ring's backlog as the store knows them at
// now.
func (s *reportStore) annotate(v *admin.RingView, now time.Time) {
	for i := range v.Rings {
		r := &v.Rings[i]
		ring := fsm.RingID(r.Key())
		for j := range r.Members {
			m := &r.Members[j]
			m.Report = s.view(memberID{Ring: ring, WorkerID: m.WorkerID, Incarnation: m.Incarnation}, now)
		}
		r.Backlog = admin.RingBacklog(*r, now)
	}
}

// backlogHistory keeps each ring's backlog age of the last BacklogSpan, one sample per report
// period, in memory: it is drawn for people and a new leader starts it anew.
type backlogHistory struct {
	size int // samples per ring

	mu     sync.Mutex
	byRing map[string][]admin.BacklogSample
}

func newBacklogHistory(period time.Duration) *backlogHistory {
	return &backlogHistory{size: max(int(admin.BacklogSpan/period), 2), byRing: map[string][]admin.BacklogSample{}}
}

// record adds a sample of every ring in rings (their Backlog) taken at now, and forgets rings
// that are gone.
func (h *backlogHistory) record(now time.Time, rings []admin.RingStateView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(rings))
	for _, r := range rings {
		name := r.Key().String()
		seen[name] = true
		s := admin.BacklogSample{At: now}
		if r.Backlog != nil && r.Backlog.AgeMs != nil {
			s.AgeMs, s.Known = *r.Backlog.AgeMs, true
		}
		samples := h.byRing[name]
		if len(samples) == h.size {
			samples = append(samples[:0], samples[1:]...)
		}
		h.byRing[name] = append(samples, s)
	}
	for name := range h.byRing {
		if !seen[name] {
			delete(h.byRing, name)
		}
	}
}

// series returns a copy of every ring's samples, oldest first, by ring name.
func (h *backlogHistory) series() map[string][]admin.BacklogSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]admin.BacklogSample, len(h.byRing))
	for name, s := range h.byRing {
		out[name] = append([]admin.BacklogSample(nil), s...)
	}
	return out
}

// sampleLoop samples every ring's backlog age once a report period while the term lasts, and
// prunes the reports of members that are gone from the state.
func (t *leaderTerm) sampleLoop() {
	tick := time.NewTicker(t.n.cfg.ReportPeriod)
	defer tick.Stop()
	for {
		t.sample()
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (t *leaderTerm) sample() {
	if t.n.currentTerm() != t {
		return
	}
	v := t.n.View()
	members := map[memberID]bool{}
	for _, r := range v.Rings {
		ring := fsm.RingID(r.Key())
		for _, m := range r.Members {
			members[memberID{Ring: ring, WorkerID: m.WorkerID, Incarnation: m.Incarnation}] = true
		}
	}
	t.reports.prune(func(m memberID) bool { return members[m] })
	rings := map[string]bool{}
	for m := range members {
		rings[m.Ring] = true
	}
	t.shares.forget(func(ring string) bool { return rings[ring] })
	t.backlog.record(t.n.clock.Now(), v.Rings)
}
