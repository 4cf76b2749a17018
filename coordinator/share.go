package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// The split of a ring's rate limit among its members (the controls' rate_per_s of each lease
// element, docs/architecture.md "Rate limit split").
//
// Rule: the limit is split in proportion to tokens among the members whose ranges have work. A
// member is idle when its fresh report (received by this leader within three report periods,
// ReportFresh) says it left no row and no unfinished window in readable windows at its last
// complete pass and it executed nothing since its previous report; an idle member gets no share.
// Every other member with ranges has work, a member with no fresh report included: a new leader
// after a failover knows no report and splits by tokens, as an unknown report is never read as
// "fine". When no member has work the split is by tokens over the whole ring, as if all had.
//
// Why: split by tokens alone, a member with few rows finishes them and its share goes unused while
// the member holding most rows runs at its own fraction of the limit (31 % of the limit in
// docs/benchmarks.md figure 8).
//
// This is the leader's view, not replicated state: it is never committed, and a new leader starts
// from none. That is safe because the shares of one view sum to the limit at most whatever the
// view says: a stale or wrong view can only give a share to a member that does not use it, or
// withhold one from a member with work until its next report (within one report period plus one
// pass: a member without a share holds its rows at once, so its pass ends quickly and reports
// them pending).

// memberWork is what the split needs of one member.
type memberWork struct {
	fraction float64 // the share of the token ring its ranges cover
	work     bool    // it has work, as the leader's view says
}

// splitRate splits limit among members (keyed as the ring's Members): in proportion to fraction
// among those with work, or among all when none has work. A member without ranges gets 0. The
// shares sum to the limit at most (up to float rounding), since the fractions of disjoint ranges
// sum to 1 at most.
func splitRate(limit float64, members map[string]memberWork) map[string]float64 {
	var working float64
	for _, m := range members {
		if m.work {
			working += m.fraction
		}
	}
	out := make(map[string]float64, len(members))
	for k, m := range members {
		switch {
		case working == 0:
			out[k] = limit * m.fraction
		case m.work:
			out[k] = limit * (m.fraction / working)
		default:
			out[k] = 0
		}
	}
	return out
}

// idleReport reports whether a report says its member has no work: no pending row, no unfinished
// readable window (a window whose rows it could not count still has work), and no execution
// since its previous report. The last rule covers a worker in its first pass, which reports the
// zeros of no pass completed while it executes.
func idleReport(r lease.Report, executedSincePrevious bool) bool {
	return r.PendingRows == 0 && r.OldestWindowStartMs == 0 && !executedSincePrevious
}

// ringShares is the split of one ring as last computed, valid while the committed state and the
// report store's work view stay as they were, and until the first idle report turns stale.
type ringShares struct {
	index  uint64
	gen    uint64
	until  time.Time // zero: no idle report to turn stale
	shares map[string]float64
}

// shareBook computes and caches the members' shares, so that a ring's renewals, one per member
// every renewal period, do not each walk all its members.
type shareBook struct {
	reports *reportStore

	mu     sync.Mutex
	byRing map[string]*ringShares
}

func newShareBook(reports *reportStore) *shareBook {
	return &shareBook{reports: reports, byRing: map[string]*ringShares{}}
}

// share is the part of r's rate limit for the member with key, from the state committed at
// index, at now; ok is false when the ring has no limit.
func (b *shareBook) share(r *fsm.Ring, index uint64, key string, now time.Time) (perSecond float64, ok bool) {
	if r.Controls == nil || r.Controls.RatePerS <= 0 {
		return 0, false
	}
	id := fsm.RingID(r.Key)
	gen := b.reports.workGen()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.byRing[id]
	if c == nil || c.index != index || c.gen != gen || !c.until.IsZero() && now.After(c.until) {
		members := make(map[string]memberWork, len(r.Members))
		var until time.Time
		for k, m := range r.Members {
			w := memberWork{fraction: m.Ranges.Fraction(), work: true}
			if w.fraction > 0 {
				idle, staleAt := b.reports.idle(memberID{Ring: id, WorkerID: m.WorkerID, Incarnation: m.Incarnation}, now)
				w.work = !idle
				if idle && (until.IsZero() || staleAt.Before(until)) {
					until = staleAt
				}
			}
			members[k] = w
		}
		c = &ringShares{index: index, gen: gen, until: until, shares: splitRate(r.Controls.RatePerS, members)}
		b.byRing[id] = c
	}
	return c.shares[key], true
}

// forget drops the rings keep refuses (gone from the state).
func (b *shareBook) forget(keep func(ring string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.byRing {
		if !keep(id) {
			delete(b.byRing, id)
		}
	}
}
