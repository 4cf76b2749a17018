package proc

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// LeaseReport is what a LeaseSampler measured, two ways: from the leader's ring view (what the
// coordinators believe) and from the workers' own answers (what the workers could act on).
type LeaseReport struct {
	// Samples counts the samples taken; Failed those in which no leader answered (the leader's
	// coverage was then judged from the expiries already known: with no leader nothing is renewed).
	Samples, Failed int
	// Leader is the coverage by the leader's view: a part of the ring is covered while an active
	// member (in the leader's view) holds it under a lease whose end, by the leader's estimate
	// (lease_expires_ms: send time + TTL), has not passed. A dead or frozen worker's range counts
	// as uncovered from the moment the leader shows it departed.
	Leader Coverage
	// Workers is the coverage by the workers' own answers (GET /readyz of every worker): a part
	// of the ring is covered while a running worker holds a lease on it that can still admit an
	// operation: lease_left_ms, counted from the moment the poll was sent, less usableReserve.
	// A killed worker's lease ends with its process; a frozen one's when its last reported
	// lease runs out.
	Workers Coverage
}

// Coverage is how long parts of the ring went without a usable lease, measured at the sampling
// period: a gap is seen from the first sample that finds the part uncovered until the first that
// finds it covered, so it may be up to one period longer than it was, and a gap shorter than a
// period may be missed.
type Coverage struct {
	// LongestGap is the longest time some part of the ring had no usable lease, and
	// LongestGapFrom when that gap was first seen.
	LongestGap     time.Duration
	LongestGapFrom time.Time
	// Uncovered is what had no usable lease at the last sample.
	Uncovered lease.Ranges
	// Gaps are the stretches during which some part of the ring had no usable lease, in the order
	// they ended (the first maxGaps of them).
	Gaps []Gap
}

// Gap is a stretch during which some part of the ring had no usable lease.
type Gap struct {
	From, To time.Time
	// Ranges is what was uncovered when the gap was first seen; Holders the workers whose last
	// known lease covered part of it then (whose lease ran out, or who died).
	Ranges  lease.Ranges
	Holders []string
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
	// leader and workers track the open gaps of each view.
	leader, workers gapTracker
	// held is each worker's lease as it last reported it (ranges and end by the sampler's clock);
	// gone keeps the last one of a worker that stopped holding any, to name who a gap was left by.
	held, gone map[string]heldLease
	// expiry is the latest end seen of each (incarnation, epoch) lease and its ranges: a worker
	// keeps using a lease after the leader that sent it died, so an old expiry stays valid until
	// it passes, whatever the new leader reports.
	expiry map[leaseKey]time.Time
	ranges map[leaseKey]lease.Ranges
}

// heldLease is a worker's lease as its /readyz reported it.
type heldLease struct {
	ranges lease.Ranges
	until  time.Time
}

type leaseKey struct {
	worker, incarnation string
	epoch               uint64
}

// gap is a part of the ring seen uncovered at every sample since since.
type gap struct {
	ranges  lease.Ranges
	since   time.Time
	first   lease.Ranges // ranges when first seen
	holders []string
}

// SampleLeases starts sampling the leader's view every period (100 ms if 0) until Stop. Start
// it once the ring has settled: before that, the whole ring counts as a gap.
func (c *Cluster) SampleLeases(every time.Duration) *LeaseSampler {
	if every <= 0 {
		every = pollEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &LeaseSampler{c: c, every: every, cancel: cancel, done: make(chan struct{}),
		expiry: map[leaseKey]time.Time{}, ranges: map[leaseKey]lease.Ranges{}, held: map[string]heldLease{}, gone: map[string]heldLease{}}
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
	// The sample describes this instant. Answers come in later (a frozen worker's poll waits out
	// its timeout), and judging every lease at the time the slowest answer arrived would count
	// the others' leases as shorter than they were when polled.
	at := time.Now()
	answers := make(chan workerAnswer, 16)
	var polls sync.WaitGroup
	for _, w := range s.c.Workers() {
		polls.Add(1)
		go func() {
			defer polls.Done()
			answers <- s.pollWorker(ctx, w)
		}()
	}
	go func() { polls.Wait(); close(answers) }()

	sctx, cancel := context.WithTimeout(ctx, s.every*5)
	_, v, err := s.c.Leader(sctx)
	cancel()
	var got []workerAnswer
	for a := range answers {
		got = append(got, a)
	}
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Samples++
	if err != nil {
		s.report.Failed++
	} else {
		s.learn(v, at)
	}
	for _, a := range got {
		s.learnWorker(a)
	}
	s.evaluate(at)
}

// workerAnswer is one poll of a worker's /readyz.
type workerAnswer struct {
	id      string
	running bool // false: the process is not running (killed, exited)
	known   bool // false: no answer (frozen, overloaded): what it last reported still stands
	held    heldLease
	ready   bool
}

// usableReserve is the part of a lease no operation can use: the worker's guard admits an
// operation only while the lease has its timeout plus the guard's margin left, and the shortest
// is a query (default 500 ms) plus the margin (100 ms). A lease counts as usable until that much
// is left.
const usableReserve = 600 * time.Millisecond

// workerPollTimeout bounds one /readyz poll; a frozen worker does not answer at all.
const workerPollTimeout = 500 * time.Millisecond

// pollWorker asks w for its lease.
func (s *LeaseSampler) pollWorker(ctx context.Context, w *Worker) workerAnswer {
	a := workerAnswer{id: w.ID, running: w.Running()}
	if !a.running {
		return a
	}
	ctx, cancel := context.WithTimeout(ctx, workerPollTimeout)
	defer cancel()
	at := time.Now() // before the worker answered: its lease ends no earlier than at + lease_left
	status, body, err := get(ctx, w.URL("/readyz"))
	if err != nil {
		return a
	}
	var r struct {
		Ready       bool              `json:"ready"`
		Ranges      []lease.WireRange `json:"ranges"`
		LeaseLeftMs int64             `json:"lease_left_ms"`
	}
	a.known = true
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || !r.Ready {
		return a
	}
	rs, err := lease.DecodeRanges(r.Ranges)
	if err != nil {
		a.known = false
		return a
	}
	usable := time.Duration(r.LeaseLeftMs)*time.Millisecond - usableReserve
	a.ready, a.held = true, heldLease{ranges: rs, until: at.Add(usable)}
	return a
}

// learnWorker updates what a worker holds from one answer.
func (s *LeaseSampler) learnWorker(a workerAnswer) {
	switch {
	case !a.running, a.known && !a.ready:
		if h, ok := s.held[a.id]; ok {
			s.gone[a.id] = h
		}
		delete(s.held, a.id)
	case a.known:
		s.held[a.id] = a.held
	}
}

// learn records the expiry of every lease in v. A member that is not active (departed: dead,
// frozen past the silence timeout, cut off, or gone) serves nothing, whatever its lease says:
// its lease stops counting at this sample.
func (s *LeaseSampler) learn(v admin.RingView, now time.Time) {
	r, ok := s.c.RingOf(v)
	if !ok {
		return
	}
	for _, m := range r.Members {
		k := leaseKey{m.WorkerID, m.Incarnation, m.Epoch}
		if m.State != admin.MemberActive {
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

// evaluate updates both views' gaps with the coverage at now.
func (s *LeaseSampler) evaluate(now time.Time) {
	var byLeader, byWorkers lease.Ranges
	for k, exp := range s.expiry {
		if exp.After(now) {
			byLeader = byLeader.Union(s.ranges[k])
		}
	}
	for _, h := range s.held {
		if h.until.After(now) {
			byWorkers = byWorkers.Union(h.ranges)
		}
	}
	s.leader.observe(&s.report.Leader, lease.Ranges{lease.FullRing}.Subtract(byLeader), now, func(rs lease.Ranges) []string {
		var out []string
		for k, r := range s.ranges {
			if !r.Intersect(rs).Empty() && !slices.Contains(out, k.worker) {
				out = append(out, k.worker)
			}
		}
		sort.Strings(out)
		return out
	})
	s.workers.observe(&s.report.Workers, lease.Ranges{lease.FullRing}.Subtract(byWorkers), now, func(rs lease.Ranges) []string {
		var out []string
		for id, h := range s.held {
			if !h.ranges.Intersect(rs).Empty() {
				out = append(out, id)
			}
		}
		for id, h := range s.gone {
			if !h.ranges.Intersect(rs).Empty() && !slices.Contains(out, id) {
				out = append(out, id+" (gone)")
			}
		}
		sort.Strings(out)
		return out
	})
}

// gapTracker follows the parts of the ring that are uncovered from sample to sample.
type gapTracker struct {
	open []gap
}

// observe records that uncovered had no usable lease at now, into c. holders names who last
// held a fresh gap's ranges.
func (t *gapTracker) observe(c *Coverage, uncovered lease.Ranges, now time.Time, holders func(lease.Ranges) []string) {
	c.Uncovered = uncovered
	var tracked lease.Ranges
	kept := t.open[:0]
	for _, g := range t.open {
		still := g.ranges.Intersect(uncovered)
		if d := now.Sub(g.since); d > c.LongestGap {
			c.LongestGap, c.LongestGapFrom = d, g.since
		}
		if !still.Empty() {
			g.ranges = still
			kept = append(kept, g)
			tracked = tracked.Union(still)
		} else if len(c.Gaps) < maxGaps {
			c.Gaps = append(c.Gaps, Gap{From: g.since, To: now, Ranges: g.first, Holders: g.holders})
		}
	}
	t.open = kept
	if fresh := uncovered.Subtract(tracked); !fresh.Empty() {
		t.open = append(t.open, gap{ranges: fresh, since: now, first: fresh, holders: holders(fresh)})
	}
}

// Report returns what was measured so far.
func (s *LeaseSampler) Report() LeaseReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.Leader.Gaps = append([]Gap(nil), s.report.Leader.Gaps...)
	r.Workers.Gaps = append([]Gap(nil), s.report.Workers.Gaps...)
	return r
}

// Stop ends the sampling and returns the report.
func (s *LeaseSampler) Stop() LeaseReport {
	s.cancel()
	<-s.done
	return s.Report()
}
