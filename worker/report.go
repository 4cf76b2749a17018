package worker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
)

// pass is what one traversal learns of the backlog of its ranges: the oldest readable window it
// left unfinished and the rows it left. Instance finishers add to it concurrently.
type pass struct {
	finishers sync.WaitGroup // instance finishers: their buckets' last rows, then deletes
	sweep     bool           // a pause sweep (sweep.go): rows are checked against markers only

	mu     sync.Mutex
	oldest time.Time // zero: every readable window finished
	rows   int64
}

// unfinished notes that the readable window starting at start keeps rows (how many, where known).
func (p *pass) unfinished(start time.Time, rows int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.oldest.IsZero() || start.Before(p.oldest) {
		p.oldest = start
	}
	p.rows += rows
}

// directoryPass is what Node-0's compaction saw of the whole directory.
type directoryPass struct {
	node0  bool
	oldest time.Time // the oldest window left in tier 2; zero: none
}

// left notes a window (or a day not listed) that stays in the directory.
func (d *directoryPass) left(start time.Time) {
	if d.oldest.IsZero() || start.Before(d.oldest) {
		d.oldest = start
	}
}

// backlog is what the last complete pass found, as ring.report sends it: a pass that stopped
// early (a lost lease, a pause, a stop) changes nothing.
type backlog struct {
	oldestMs    atomic.Int64
	pendingRows atomic.Int64
	// directoryMs is the oldest live window of the directory at Node-0's last compaction pass; 0
	// when this worker was not Node-0 then.
	directoryMs atomic.Int64
}

func (b *backlog) publish(p *pass, dir directoryPass) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.oldestMs.Store(unixMs(p.oldest))
	b.pendingRows.Store(p.rows)
	b.directoryMs.Store(unixMs(dir.oldest))
}

// unixMs is t in Unix ms, 0 for the zero time (the report's "none").
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Report is what this worker saw, for the operator (ring.report, docs/protocol.md section 7.1):
// executions by outcome, dead letters and guard refusals since it started, the breakers that are
// not closed, the backlog its last complete pass left in readable windows of its ranges, as
// Node-0 the oldest window of the whole directory, and whether its timeouts fit its lease. Give
// it to the lease client (leaseclient.Config.Report).
func (s *Scanner) Report() lease.Report {
	st := s.Stats()
	r := lease.Report{
		Executions: map[string]uint64{
			Done.String(): st.Done, Transient.String(): st.Transient, Permanent.String(): st.Permanent, NotSent.String(): st.NotSent,
		},
		DeadLettered:        st.DeadLettered,
		GuardRefusals:       st.GuardRefusals,
		Breakers:            []lease.BreakerReport{},
		OldestWindowStartMs: s.backlog.oldestMs.Load(),
		PendingRows:         s.backlog.pendingRows.Load(),
		LeaseFit:            s.LeaseFit(),
	}
	if s.cfg.ClockCheck != nil {
		r.Clock = clockReport(s.cfg.ClockCheck.Status())
	}
	if l, ok := s.guard.Current(); ok && l.IsNode0() {
		r.DirectoryOldestWindowStartMs = s.backlog.directoryMs.Load()
	}
	for _, b := range s.breakers.view(s.now()) {
		if b.state != breakerClosed {
			r.Breakers = append(r.Breakers, lease.BreakerReport{Impl: b.impl, State: b.state.String(), OpenUntilMs: unixMs(b.openUntil)})
		}
	}
	return r
}

// clockReport is the report's clock field; nil before the first measurement.
func clockReport(st clockcheck.Status) *lease.ClockReport {
	if !st.Measured {
		return nil
	}
	return &lease.ClockReport{
		OffsetUs: st.Estimate.Offset.Microseconds(), UncertaintyUs: st.Estimate.Uncertainty.Microseconds(),
		LimitUs: st.Limit.Microseconds(), AgeMs: max(st.Age.Milliseconds(), 0), Trusted: st.Trusted,
	}
}
