package worker

import (
	"context"
	"sync"
	"time"

	"github.com/retryring/retryring/cassandra"
)

// A whole-ring pause stops every traversal, but not the clock on the markers of the rows that
// kept buckets hold: a bucket kept by the pause, or before it, must still be carried before its
// handled rows' markers expire (product.md, "Marker retention"), or those rows would run again on
// resume. Carrying needs a read of the bucket, and noticing that it is due needs a read of its
// markers, so a paused ring is swept once every Config.PauseSweepEvery: a traversal in which each
// row is only checked against its marker (sweepRow) and finish carries a bucket whose markers
// near expiry. It admits nothing, calls nobody, and writes no marker; its only writes are those
// of finish (a carried bucket's copies, the delete of a bucket every row of which was finished by
// its marker). Each of its queries goes through the guard like any other. It is the one read a
// paused worker makes.

// errSweptPaused holds a row the pause sweep found unfinished: it waits for the resume.
var errSweptPaused = heldError{"paused (sweep)"}

// pauseSweeps times the sweeps of a pause: the first one PauseSweepEvery after this worker saw
// the pause, then every PauseSweepEvery, so that a short pause reads nothing at all.
type pauseSweeps struct {
	mu   sync.Mutex
	last time.Time // the pause's first sight, then the last sweep; zero while not paused
}

// due reports whether a paused cycle at now sweeps, and if so starts the next period.
func (p *pauseSweeps) due(now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.last.IsZero():
		p.last = now
		return false
	case now.Sub(p.last) < every:
		return false
	}
	p.last = now
	return true
}

// resumed forgets the pause: the next one is timed from its own start.
func (p *pauseSweeps) resumed() {
	p.mu.Lock()
	p.last = time.Time{}
	p.mu.Unlock()
}

// sweepCycle runs the pause sweep for Cycle. It does not compact the directory and publishes no
// backlog: it is not a pass over the work, only over the markers.
func (s *Scanner) sweepCycle(ctx context.Context, res CycleResult, before Stats) (CycleResult, error) {
	res.Swept = true
	err := s.traverse(ctx, &res, &pass{sweep: true})
	s.endRescans()
	s.count(&s.stats.PauseSweeps)
	s.count(&s.stats.Cycles)
	res.Stats = s.Stats().Sub(before)
	s.log.Info().Int("windows", res.Windows).Uint64("carried", res.Stats.Carried).
		Uint64("buckets_deleted", res.Stats.BucketsDeleted).Err(err).Msg("paused ring swept: kept buckets checked against their markers' expiry")
	return res, err
}

// sweepRow is runRow for a pause sweep: it reads the row's marker (through the guard) and
// reports the row finished when the marker finishes it, noting a marker that nears its expiry
// so that finish carries the bucket. Every other row is held for the resume.
func (s *Scanner) sweepRow(ctx context.Context, run *bucketRun, t cassandra.Transaction) (bool, error) {
	var m cassandra.Marker
	var found bool
	err := s.onToken(ctx, run.token, func(ctx context.Context) (err error) {
		m, found, err = s.store.Marker(ctx, t.ID, t.ImplType)
		return err
	})
	if err != nil {
		return false, err
	}
	c := finishedBy(m, found, t)
	if c == 0 {
		s.count(&s.stats.HeldPaused)
		return false, errSweptPaused
	}
	s.count(s.stats.field(c))
	if m.Expiring(t.Copy(), carryMargin) {
		run.expiring.Store(true)
	}
	return true, nil
}
