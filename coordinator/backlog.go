package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// BacklogView is a ring's backlog as the leader's fresh reports show it: the figure an operator
// alerts on (AgeMs) and what explains it. Sums and lists count members that are not departed and
// whose report is fresh; a departed member's ranges are handed on, and its figures with them.
type BacklogView struct {
	// State is ReportFresh when the fresh reports cover the ring: the ranges of the active
	// members that reported cover every token, or Node-0 reported the oldest live window of the
	// whole directory (which bounds every range's). Otherwise ReportUnknown.
	State string `json:"state"`
	// AgeMs is now minus OldestWindowStartMs on the leader's wall clock, 0 when nothing is
	// pending; null when State is unknown.
	AgeMs *int64 `json:"age_ms"`
	// OldestWindowStartMs is the oldest of the fresh reports' oldest_window_start_ms and of
	// Node-0's directory_oldest_window_start_ms (Unix ms, UTC); 0: none.
	OldestWindowStartMs int64 `json:"oldest_window_start_ms"`
	// PendingRows sums the fresh reports' pending_rows.
	PendingRows int64 `json:"pending_rows"`
	// ExecutionsPerS sums the members' execution rates by outcome: always done, transient,
	// permanent and not_sent; "other" for any other outcome a worker names, when there is one.
	ExecutionsPerS map[string]float64 `json:"executions_per_s"`
	// DeadLettersPerHour sums the members' dead-letter rates.
	DeadLettersPerHour float64 `json:"dead_letters_per_hour"`
	// OpenBreakers lists every circuit breaker that is not closed, by member.
	OpenBreakers []OpenBreaker `json:"open_breakers"`
	// ReportsUnknown names the members (not departed) whose report is unknown.
	ReportsUnknown []string `json:"reports_unknown"`
	// LeaseUnfit names the members whose timeouts do not fit their leases (lease_fit).
	LeaseUnfit []string `json:"lease_unfit"`
}

// OpenBreaker is a member's circuit breaker that is open or half open.
type OpenBreaker struct {
	WorkerID string `json:"worker_id"`
	lease.BreakerReport
}

// Execution outcomes that the backlog and /metrics name; any other is counted as outcomeOther,
// so that nothing a worker sends adds a label value.
var knownOutcomes = []string{"done", "transient", "permanent", "not_sent"}

const outcomeOther = "other"

func outcomeLabel(outcome string) string {
	for _, o := range knownOutcomes {
		if o == outcome {
			return o
		}
	}
	return outcomeOther
}

// ringBacklog aggregates the reports of r's members (MemberView.Report) at now.
func ringBacklog(r RingStateView, now time.Time) *BacklogView {
	b := &BacklogView{
		State: ReportUnknown, ExecutionsPerS: map[string]float64{},
		OpenBreakers: []OpenBreaker{}, ReportsUnknown: []string{}, LeaseUnfit: []string{},
	}
	for _, o := range knownOutcomes {
		b.ExecutionsPerS[o] = 0
	}
	var covered lease.Ranges
	node0 := false
	oldest := func(ms int64) {
		if ms > 0 && (b.OldestWindowStartMs == 0 || ms < b.OldestWindowStartMs) {
			b.OldestWindowStartMs = ms
		}
	}
	for _, m := range r.Members {
		if m.State == MemberDeparted {
			continue
		}
		rep := m.Report
		if rep == nil || rep.State != ReportFresh {
			b.ReportsUnknown = append(b.ReportsUnknown, m.WorkerID)
			continue
		}
		if rs, err := lease.DecodeRanges(m.Ranges); err == nil && m.State == MemberActive {
			covered = covered.Union(rs)
		}
		oldest(rep.OldestWindowStartMs)
		oldest(rep.DirectoryOldestWindowStartMs)
		// A Node-0 that reports no directory window may not have finished a pass since it became
		// Node-0: only a window it saw vouches for the whole ring.
		if m.State == MemberActive && m.NodeIndex == 0 && rep.DirectoryOldestWindowStartMs > 0 {
			node0 = true
		}
		b.PendingRows += rep.PendingRows
		for outcome, v := range rep.ExecutionsPerS {
			b.ExecutionsPerS[outcomeLabel(outcome)] += v
		}
		if rep.DeadLettersPerHour != nil {
			b.DeadLettersPerHour += *rep.DeadLettersPerHour
		}
		for _, br := range rep.Breakers {
			b.OpenBreakers = append(b.OpenBreakers, OpenBreaker{WorkerID: m.WorkerID, BreakerReport: br})
		}
		if rep.LeaseFit != "" {
			b.LeaseUnfit = append(b.LeaseUnfit, m.WorkerID)
		}
	}
	if node0 || covered.Equal(lease.Ranges{lease.FullRing}) {
		b.State = ReportFresh
		age := int64(0)
		if b.OldestWindowStartMs > 0 {
			age = max(now.UnixMilli()-b.OldestWindowStartMs, 0)
		}
		b.AgeMs = &age
	}
	return b
}

// annotate adds to v every member's report and every ring's backlog as the store knows them at
// now.
func (s *reportStore) annotate(v *RingView, now time.Time) {
	for i := range v.Rings {
		r := &v.Rings[i]
		ring := fsm.RingID(r.key())
		for j := range r.Members {
			m := &r.Members[j]
			m.Report = s.view(memberID{Ring: ring, WorkerID: m.WorkerID, Incarnation: m.Incarnation}, now)
		}
		r.Backlog = ringBacklog(*r, now)
	}
}

func (r RingStateView) key() lease.RingKey {
	return lease.RingKey{Region: r.Region, Cluster: r.Cluster, Service: r.Service}
}

// backlogSpan is how far back the ring page's sparkline of backlog age reaches.
const backlogSpan = 10 * time.Minute

// backlogSample is a ring's backlog age at one sampling time; known is false while it was unknown.
type backlogSample struct {
	at    time.Time
	ageMs int64
	known bool
}

// backlogHistory keeps each ring's backlog age of the last backlogSpan, one sample per report
// period, in memory: it is drawn for people and a new leader starts it anew.
type backlogHistory struct {
	size int // samples per ring

	mu     sync.Mutex
	byRing map[string][]backlogSample
}

func newBacklogHistory(period time.Duration) *backlogHistory {
	return &backlogHistory{size: max(int(backlogSpan/period), 2), byRing: map[string][]backlogSample{}}
}

// record adds a sample of every ring in rings (their Backlog) taken at now, and forgets rings
// that are gone.
func (h *backlogHistory) record(now time.Time, rings []RingStateView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(rings))
	for _, r := range rings {
		name := r.key().String()
		seen[name] = true
		s := backlogSample{at: now}
		if r.Backlog != nil && r.Backlog.AgeMs != nil {
			s.ageMs, s.known = *r.Backlog.AgeMs, true
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
func (h *backlogHistory) series() map[string][]backlogSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]backlogSample, len(h.byRing))
	for name, s := range h.byRing {
		out[name] = append([]backlogSample(nil), s...)
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
		ring := fsm.RingID(r.key())
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
