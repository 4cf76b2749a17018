package proc

import (
	"context"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/lease"
)

// LeaseReport is what a LeaseSampler measured.
type LeaseReport struct {
	// Samples counts the views read; Failed the samples in which no leader answered (coverage
	// was then judged from the expiries already known: with no leader nothing is renewed).
	Samples, Failed int
	// LongestGap is the longest time some part of the ring had no usable lease: no active member
	// (in the leader's view) held it under a lease whose end, by the leader's estimate
	// (lease_expires_ms: send time + TTL), had not passed. A dead or frozen worker's range counts
	// as uncovered from the moment the leader shows it departed. It is measured at the
	// sampling period: a gap is seen from the first sample that finds the part uncovered until the
	// first that finds it covered, so it may be up to one period longer than it was, and a gap
	// shorter than a period may be missed.
	LongestGap time.Duration
	// LongestGapFrom is when that gap was first seen.
	LongestGapFrom time.Time
	// Uncovered is what had no usable lease at the last sample.
	Uncovered lease.Ranges
	// Gaps are the stretches during which some part of the ring had no usable lease, in the order
	// they ended (the first maxGaps of them), each as seen by the samples (see LongestGap).
	Gaps []Gap
}

// Gap is a stretch during which some part of the ring had no usable lease.
type Gap struct {
	From, To time.Time
}

// Length is how long the gap lasted.
func (g Gap) Length() time.Duration { return g.To.Sub(g.From) }

// maxGaps bounds LeaseReport.Gaps.
const maxGaps = 10000

// LeaseSampler samples the leader's ring view on a period; see LeaseReport.
type LeaseSampler struct {
	c      *Cluster
	every  time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	report LeaseReport
	// expiry is the latest end seen of each (incarnation, epoch) lease and its ranges: a worker
	// keeps using a lease after the leader that sent it died, so an old expiry stays valid until
	// it passes, whatever the new leader reports.
	expiry map[leaseKey]time.Time
	ranges map[leaseKey]lease.Ranges
	gaps   []gap
}

type leaseKey struct {
	worker, incarnation string
	epoch               uint64
}

// gap is a part of the ring seen uncovered at every sample since since.
type gap struct {
	ranges lease.Ranges
	since  time.Time
}

// SampleLeases starts sampling the leader's view every period (100 ms if 0) until Stop. Start
// it once the ring has settled: before that, the whole ring counts as a gap.
func (c *Cluster) SampleLeases(every time.Duration) *LeaseSampler {
	if every <= 0 {
		every = pollEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &LeaseSampler{c: c, every: every, cancel: cancel, done: make(chan struct{}),
		expiry: map[leaseKey]time.Time{}, ranges: map[leaseKey]lease.Ranges{}}
	go s.run(ctx)
	return s
}

func (s *LeaseSampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *LeaseSampler) sample(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, s.every*5)
	_, v, err := s.c.Leader(sctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Samples++
	now := time.Now()
	if err != nil {
		s.report.Failed++
	} else {
		s.learn(v, now)
	}
	s.evaluate(now)
}

// learn records the expiry of every lease in v. A member that is not active (departed: dead,
// frozen past the silence timeout, cut off, or gone) serves nothing, whatever its lease says:
// its lease stops counting at this sample.
func (s *LeaseSampler) learn(v coordinator.RingView, now time.Time) {
	r, ok := s.c.RingOf(v)
	if !ok {
		return
	}
	for _, m := range r.Members {
		k := leaseKey{m.WorkerID, m.Incarnation, m.Epoch}
		if m.State != coordinator.MemberActive {
			for old := range s.expiry {
				if old.worker == m.WorkerID && old.incarnation == m.Incarnation && s.expiry[old].After(now) {
					s.expiry[old] = now
				}
			}
			continue
		}
		if m.LeaseExpiresMs <= 0 {
			continue
		}
		rs, err := lease.DecodeRanges(m.Ranges)
		if err != nil {
			continue
		}
		if exp := time.UnixMilli(m.LeaseExpiresMs); exp.After(s.expiry[k]) {
			s.expiry[k] = exp
		}
		s.ranges[k] = rs
	}
}

// evaluate updates the gaps with the coverage at now.
func (s *LeaseSampler) evaluate(now time.Time) {
	var covered lease.Ranges
	for k, exp := range s.expiry {
		if exp.After(now) {
			covered = covered.Union(s.ranges[k])
		}
	}
	uncovered := lease.Ranges{lease.FullRing}.Subtract(covered)
	s.report.Uncovered = uncovered
	var tracked lease.Ranges
	kept := s.gaps[:0]
	for _, g := range s.gaps {
		still := g.ranges.Intersect(uncovered)
		if d := now.Sub(g.since); d > s.report.LongestGap {
			s.report.LongestGap, s.report.LongestGapFrom = d, g.since
		}
		if !still.Empty() {
			kept = append(kept, gap{ranges: still, since: g.since})
			tracked = tracked.Union(still)
		} else if len(s.report.Gaps) < maxGaps {
			s.report.Gaps = append(s.report.Gaps, Gap{From: g.since, To: now})
		}
	}
	s.gaps = kept
	if fresh := uncovered.Subtract(tracked); !fresh.Empty() {
		s.gaps = append(s.gaps, gap{ranges: fresh, since: now})
	}
}

// Report returns what was measured so far.
func (s *LeaseSampler) Report() LeaseReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Gaps = append([]Gap(nil), s.report.Gaps...)
	return r
}

// Stop ends the sampling and returns the report.
func (s *LeaseSampler) Stop() LeaseReport {
	s.cancel()
	<-s.done
	return s.Report()
}
