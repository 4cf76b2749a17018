package coordinator

import (
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// receivedReport is one ring.report with its receipt time on the leader's clock.
type receivedReport struct {
	report lease.Report
	at     time.Time
}

// memberReports is the last report of a member and the one its rates are taken against.
type memberReports struct {
	last    receivedReport
	base    receivedReport
	hasBase bool
}

// reportStore keeps the last report of each member of the leader's rings, in memory only: a
// report is for people and for the leader's rate split (share.go), and a new leader starts with
// none (every member reads unknown, and has work, until it reports again, within one period). Members that are gone from the state are pruned, so it
// holds at most one entry per member.
type reportStore struct {
	period time.Duration

	mu       sync.Mutex
	byMember map[memberID]*memberReports
	// gen counts the changes of the work view (idle): the rate split is recomputed after one.
	gen uint64
}

func newReportStore(period time.Duration) *reportStore {
	return &reportStore{period: period, byMember: map[memberID]*memberReports{}}
}

// put keeps r as the member's last report, received at now. The previous last report becomes
// the base of the rates only when it is at least half a period older: the report a worker sends
// at once after a new lease may follow a periodic one by milliseconds, and a rate over such a
// span says nothing. It reports whether the report changed the member's work view (idle), so
// that the caller wakes the ring's lease streams to carry the new split.
func (s *reportStore) put(id memberID, r lease.Report, now time.Time) (workChanged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got := receivedReport{report: r, at: now}
	e, ok := s.byMember[id]
	if !ok {
		s.byMember[id] = &memberReports{last: got}
		return false // one report never makes a member idle: see idleAt
	}
	was := s.idleAt(e, now)
	if now.Sub(e.last.at) >= s.period/2 {
		e.base, e.hasBase = e.last, true
	}
	e.last = got
	if s.idleAt(e, now) != was {
		s.gen++
		return true
	}
	return false
}

// prune forgets every member keep refuses (it left the ring, or the ring is gone).
func (s *reportStore) prune(keep func(memberID) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.byMember {
		if !keep(id) {
			if s.idleAt(e, time.Time{}) {
				s.gen++
			}
			delete(s.byMember, id)
		}
	}
}

// idle reports whether the member is idle in the leader's work view at now (share.go), and when
// that ends by time alone: its last report turns stale then.
func (s *reportStore) idle(id memberID, now time.Time) (idle bool, staleAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byMember[id]
	if !ok {
		return false, time.Time{}
	}
	return s.idleAt(e, now), e.last.at.Add(s.fresh())
}

// workGen is the generation of the work view: it changes whenever a report or a prune changes
// whether a member is idle (staleness aside, which idle's staleAt covers).
func (s *reportStore) workGen() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// fresh is how long a report stays fresh: three report periods, so that one late or lost report
// does not turn a member unknown.
func (s *reportStore) fresh() time.Duration { return 3 * s.period }

// idleAt reports whether e's last report, fresh at now, says its member is idle: no pending row,
// no unfinished readable window, and no execution since the base report. It takes two reports
// half a period apart at least: the first report of a worker, sent at once after its lease,
// carries the zeros of no pass completed. A zero now asks about the figures alone (prune).
func (s *reportStore) idleAt(e *memberReports, now time.Time) bool {
	if !e.hasBase || !now.IsZero() && now.Sub(e.last.at) > s.fresh() {
		return false
	}
	var before, after uint64
	for _, n := range e.base.report.Executions {
		before += n
	}
	for _, n := range e.last.report.Executions {
		after += n
	}
	return idleReport(e.last.report, increase(before, after) > 0)
}

// view is the member's report as the ring view shows it at now.
func (s *reportStore) view(id memberID, now time.Time) *admin.MemberReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byMember[id]
	if !ok {
		return &admin.MemberReport{State: admin.ReportUnknown}
	}
	age := now.Sub(e.last.at)
	ageMs := age.Milliseconds()
	r := e.last.report
	mr := &admin.MemberReport{State: admin.ReportUnknown, AgeMs: &ageMs, Report: &r}
	if age <= s.fresh() {
		mr.State = admin.ReportFresh
	}
	if span := e.last.at.Sub(e.base.at); e.hasBase && span > 0 {
		base := e.base.report
		mr.ExecutionsPerS = make(map[string]float64, len(r.Executions))
		for outcome, n := range r.Executions {
			mr.ExecutionsPerS[outcome] = float64(increase(base.Executions[outcome], n)) / span.Seconds()
		}
		perHour := float64(increase(base.DeadLettered, r.DeadLettered)) / span.Hours()
		mr.DeadLettersPerHour = &perHour
	}
	return mr
}

// increase is how much a cumulative counter grew from was to now. A counter that went down was
// reset (a worker process does not carry its counts over): it counted now since then.
func increase(was, now uint64) uint64 {
	if now < was {
		return now
	}
	return now - was
}

// report keeps a ring.report of the worker on c. A report of a worker that is not a member of
// its ring (it has not joined yet, or it left) is acknowledged and dropped: only members are
// shown, and keeping it would let connections that never join grow the store.
func (n *Node) report(c *workerConn, r lease.Report) (any, error) {
	t := n.currentTerm()
	if t == nil {
		return nil, n.redirect()
	}
	member, limited := false, false
	n.fsm.View(func(s *fsm.State, _ uint64) {
		ring := s.Rings[c.member.Ring]
		member = ring != nil && ring.Members[c.member.Key()] != nil
		limited = member && ring.Controls != nil && ring.Controls.RatePerS > 0
	})
	// A report that changes who has work changes the ring's split: its streams carry the new
	// shares at once, without a commit (the split is the leader's view, share.go).
	if member && t.reports.put(c.member, r, n.clock.Now()) && limited {
		t.wakeRing(c.member.Ring)
	}
	return lease.Ack{OK: true}, nil
}
