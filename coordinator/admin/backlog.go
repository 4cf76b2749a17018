package admin

import (
	"time"

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

// KnownOutcomes are the execution outcomes that the backlog and /metrics name; any other is
// counted as OutcomeOther, so that nothing a worker sends adds a label value.
var KnownOutcomes = []string{"done", "transient", "permanent", "not_sent"}

// OutcomeOther counts every outcome that is not one of KnownOutcomes.
const OutcomeOther = "other"

// OutcomeLabel is outcome if it is one of KnownOutcomes, else OutcomeOther.
func OutcomeLabel(outcome string) string {
	for _, o := range KnownOutcomes {
		if o == outcome {
			return o
		}
	}
	return OutcomeOther
}

// RingBacklog aggregates the reports of r's members (MemberView.Report) at now: the leader
// annotates its view with it.
func RingBacklog(r RingStateView, now time.Time) *BacklogView {
	b := &BacklogView{
		State: ReportUnknown, ExecutionsPerS: map[string]float64{},
		OpenBreakers: []OpenBreaker{}, ReportsUnknown: []string{}, LeaseUnfit: []string{},
	}
	for _, o := range KnownOutcomes {
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
			b.ExecutionsPerS[OutcomeLabel(outcome)] += v
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

// BacklogSpan is how far back the ring page's sparkline of backlog age reaches.
const BacklogSpan = 10 * time.Minute

// BacklogSample is a ring's backlog age at one sampling time, as the leader keeps them for the
// ring page's sparkline; Known is false while the age was unknown.
type BacklogSample struct {
	At    time.Time
	AgeMs int64
	Known bool
}
