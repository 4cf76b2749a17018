package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// CycleResult says what one cycle found and finished.
type CycleResult struct {
	Days      int // candidate days listed
	Windows   int // readable windows visited
	Instances int // instance markers found in the lease's ranges
	// Paused: the operator paused the ring, so the cycle traversed nothing (or stopped when the
	// pause came), unless it was a pause sweep.
	Paused bool
	// Swept: the ring is paused and this cycle was the pause sweep (see Cycle): rows were read
	// and checked against their markers, none was executed.
	Swept bool
	Stats Stats
}

// Progress reports whether the cycle changed anything for good: a step COMMITTED, a failure
// recorded again or dead-lettered, a bucket, instance, window or day deleted. Run pauses after a
// cycle without progress, so that a failing Cassandra or executor is not hammered in a loop.
func (r CycleResult) Progress() bool {
	s := r.Stats
	return s.Committed+s.Rerecorded+s.DeadLettered+s.BucketsDeleted+s.InstancesDeleted+s.WindowsDeleted+s.DaysDeleted > 0
}

// Cycle runs one pass over the directory: every candidate day oldest first, every readable window
// of it earliest first, every instance of the window in the lease's ranges, every bucket of the
// instance; then, as Node-0, directory compaction. It returns when every row it dispatched has
// finished. The error is the one that stopped the pass early (ctx ending, a guard refusal that
// holds for every token), or else the first failed read that made it skip a day, a range or an
// instance; failures inside a bucket only keep that bucket for a later pass.
//
// A ring the operator paused is not traversed: the cycle returns at once with Paused set, or
// stops at the next window (its rows are held) when the pause comes while it runs. The one
// exception is the pause sweep, once every Config.PauseSweepEvery of a pause (see sweep.go).
func (s *Scanner) Cycle(ctx context.Context) (CycleResult, error) {
	before := s.Stats()
	var res CycleResult
	// Say so, once, when the lease in force leaves the timeouts no room; and say at the end the
	// refusals of a long cycle that no later refusal would bring out.
	s.LeaseFit()
	defer func() { s.refusals.flush(s, s.now()) }()
	if c := s.controls(); c != nil && c.Paused {
		res.Paused = true
		if s.sweeps.due(s.now(), s.cfg.PauseSweepEvery) {
			return s.sweepCycle(ctx, res, before)
		}
		return res, nil
	}
	s.sweeps.resumed()
	p := &pass{}
	err := s.traverse(ctx, &res, p)
	var dir directoryPass
	if !s.stops(ctx, err) {
		var cerr error
		dir, cerr = s.compactDirectory(ctx)
		err = cmp.Or(cerr, err)
	}
	switch {
	case errors.Is(err, errRingPaused):
		res.Paused, err = true, nil
	case !s.stops(ctx, err):
		s.backlog.publish(p, dir)
	}
	s.endRescans()
	s.count(&s.stats.Cycles)
	res.Stats = s.Stats().Sub(before)
	return res, err
}

// stops reports whether err must end the cycle: the worker is stopping, the ring is paused, or
// the guard refused for a reason that holds for every token (no lease, expired, too short). A
// failed query or a token that left the lease only skips what it was about.
func (s *Scanner) stops(ctx context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case ctx.Err() != nil, errors.Is(err, ErrStopped), errors.Is(err, errRingPaused):
		return true
	default:
		return lease.IsGuardError(err) && !errors.Is(err, lease.ErrTokenNotLeased)
	}
}

// traverse visits the directory. A day or a range whose read failed is skipped for this cycle
// (and reported at the end); it never stops the days after it from being visited. What it leaves
// unfinished in readable windows is noted in p.
func (s *Scanner) traverse(ctx context.Context, res *CycleResult, p *pass) (first error) {
	defer p.finishers.Wait()

	days, err := s.candidateDays(ctx)
	if s.stops(ctx, err) {
		return err
	}
	first = err
	res.Days = len(days)
	for _, d := range days {
		ws, _, err := s.liveWindows(ctx, d, s.onDirectory)
		if s.stops(ctx, err) {
			return err
		}
		if err != nil {
			s.log.Warn().Err(err).Stringer("day", d).Msg("day skipped this cycle")
			p.unfinished(d.Time(), 0) // its windows are unknown: the day's start stands for them
			first = cmp.Or(first, err)
			continue
		}
		for _, w := range ws {
			if !window.Readable(w, s.now(), s.cfg.MaxClockOffset) {
				break // windows come earliest first: the rest are not readable either
			}
			res.Windows++
			if err := s.scanWindow(ctx, w, res, p); err != nil {
				if s.stops(ctx, err) {
					return err
				}
				first = cmp.Or(first, err)
			}
		}
	}
	return first
}

// candidateDays lists the days to visit, oldest first, up to today: every live day of
// es_days_by_year for last year and this year (and any year the lookback reaches), plus the
// lookback days themselves even if tier 1 lost them. A year whose listing failed is reported,
// and the other days are still returned.
func (s *Scanner) candidateDays(ctx context.Context) (days []window.Date, first error) {
	today := window.DateOf(s.now())
	from := today.AddDays(-s.cfg.LookbackDays)
	set := map[window.Date]bool{}
	for y := min(from.Year, today.Year-1); y <= today.Year; y++ {
		ds, _, err := s.liveDays(ctx, y, s.onDirectory)
		if s.stops(ctx, err) {
			return nil, err
		}
		if err != nil {
			s.log.Warn().Err(err).Int("year", y).Msg("days of the year not listed this cycle")
			first = cmp.Or(first, err)
		}
		for _, d := range ds {
			if !d.After(today) {
				set[d] = true
			}
		}
	}
	for d := from; !d.After(today); d = d.AddDays(1) {
		set[d] = true
	}
	for d := range set {
		days = append(days, d)
	}
	sort.Slice(days, func(i, j int) bool { return days[i].Before(days[j]) })
	return days, first
}

// scanWindow visits the instances of w whose tokens lie in the current lease: one query per
// leased range. A token that left the lease, or a failed query, skips what it was about; a
// refusal that holds for every token (or a stop) ends the cycle.
func (s *Scanner) scanWindow(ctx context.Context, w window.Window, res *CycleResult, p *pass) (first error) {
	l, err := s.guard.Check(s.cfg.QueryTimeout)
	if err != nil {
		return s.refused(err)
	}
	if c := s.controls(); c != nil && c.Paused && !p.sweep {
		return errRingPaused
	}
	gained, start := s.rescans.window(w, l.Ranges)
	rescanned := &s.stats.InstancesRescannedHandover
	if start {
		rescanned = &s.stats.InstancesRescannedStart
	}
	for _, rg := range l.Ranges {
		instances, err := s.listInstances(ctx, w, rg)
		if s.stops(ctx, err) {
			return err
		}
		if err != nil {
			if !errors.Is(err, lease.ErrTokenNotLeased) {
				s.log.Warn().Err(err).Stringer("window", w).Stringer("range", rg).Msg("range skipped this cycle")
				p.unfinished(w.Start(), 0)
				first = cmp.Or(first, err)
			}
			continue
		}
		for _, in := range instances {
			res.Instances++
			s.count(&s.stats.InstancesScanned)
			if gained.Contains(in.Token) {
				s.count(rescanned)
			}
			err := s.startInstance(ctx, w, in, p)
			if s.stops(ctx, err) {
				return err
			}
			if err != nil && !errors.Is(err, lease.ErrTokenNotLeased) {
				s.log.Warn().Err(err).Str("instance_id", in.ID).Stringer("window", w).Msg("instance kept")
				p.unfinished(w.Start(), 0)
				first = cmp.Or(first, err)
			}
		}
	}
	return first
}

// listInstances runs the token-range query for rg, provided the lease still holds all of rg.
func (s *Scanner) listInstances(ctx context.Context, w window.Window, rg lease.Range) ([]cassandra.Instance, error) {
	var out []cassandra.Instance
	err := s.run(ctx, opScope{tokens: lease.Ranges{rg}}, s.cfg.QueryTimeout,
		func(need time.Duration) (lease.Lease, error) {
			l, err := s.guard.Check(need)
			if err == nil && !(lease.Ranges{rg}).Subtract(l.Ranges).Empty() {
				err = fmt.Errorf("%w: range %s (epoch %d)", lease.ErrTokenNotLeased, rg, l.Epoch)
			}
			return l, err
		},
		func(ctx context.Context, _ lease.Lease) (err error) {
			out, err = s.store.ListInstances(ctx, w, rg)
			return err
		})
	return out, err
}

// startInstance lists the instance's buckets and streams them one after the other; it returns
// once every row is dispatched, leaving the waiting and the deletes to a finisher in p. The
// instance marker goes only when every bucket of the instance is gone.
func (s *Scanner) startInstance(ctx context.Context, w window.Window, in cassandra.Instance, p *pass) error {
	if in.Token != cassandra.Token(in.ID) {
		s.log.Error().Str("instance_id", in.ID).Int64("stored_token", in.Token).Int64("token", cassandra.Token(in.ID)).
			Stringer("window", w).Msg("instance marker carries a token that is not token(instance_id)")
	}
	var buckets []int
	if err := s.onToken(ctx, in.Token, func(ctx context.Context) (err error) {
		buckets, err = s.store.ListBuckets(ctx, w, in.ID)
		return err
	}); err != nil {
		return err
	}
	runs := make([]*bucketRun, 0, len(buckets))
	var stopErr error
	for _, b := range buckets {
		run, err := s.streamBucket(ctx, cassandra.BucketKey{Window: w, InstanceID: in.ID, Bucket: b}, in.Token, p.sweep)
		runs = append(runs, run)
		if err != nil {
			stopErr = err
			break
		}
	}
	p.finishers.Add(1)
	go func() {
		defer p.finishers.Done()
		gone := stopErr == nil
		for _, run := range runs {
			if !s.finish(ctx, run) {
				gone = false
				p.unfinished(w.Start(), run.seen.Load()-run.finished.Load())
			}
		}
		if !gone {
			return
		}
		if s.deleteInstance(context.WithoutCancel(ctx), w, in) {
			s.count(&s.stats.InstancesDeleted)
		}
	}()
	return stopErr
}

// deleteInstance deletes the instance marker of a drained instance by a checked delete
// (docs/schema.md): it reads the write clock, checks that no bucket row is left, and deletes the
// marker with a tombstone stamped max_clock_offset before that reading, all under one guard
// check and one inflight scope, so that no release of the token comes between check and delete.
// A late write (an import into a window whose time has come) adds a fresh bucket before it
// writes the marker again: either the check sees the bucket and the marker stays, or the
// writer's marker comes after the check, newer than the tombstone, and survives it; the next
// pass drains the bucket. Nothing is written back.
func (s *Scanner) deleteInstance(ctx context.Context, w window.Window, in cassandra.Instance) bool {
	var buckets []int
	err := s.onToken(ctx, in.Token, func(ctx context.Context) (err error) {
		checkedAt := s.cfg.WriteClock.Now()
		if buckets, err = s.store.ListBuckets(ctx, w, in.ID); err != nil || len(buckets) > 0 {
			return err
		}
		return s.store.DeleteInstance(ctx, w, in.ID, s.deleteTime(checkedAt))
	})
	log := s.log.With().Str("instance_id", in.ID).Stringer("window", w).Logger()
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("instance marker not deleted")
		return false
	case len(buckets) > 0:
		log.Info().Ints("buckets", buckets).Msg("instance marker kept: buckets appeared after the drain")
		return false
	}
	return true
}

// deleteTime is the tombstone timestamp of a checked delete whose check began at checkedAt (a
// reading of the write clock): no row a writer within the clock bound writes after the check is
// older than it.
func (s *Scanner) deleteTime(checkedAt time.Time) time.Time {
	return cassandra.CheckedDeleteTime(checkedAt, s.cfg.MaxClockOffset)
}
