package worker

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// compactDirectory is Node-0's job, run at the end of every cycle while the guard says this
// worker is Node-0. For every candidate day, oldest first, and every window of it, earliest first:
//
//   - gate 2 (time): the clock is past the window's end plus max_clock_offset; the first window
//     that fails it ends the day's pass, since every later window fails it too;
//   - gate 1 (cluster-wide completion): no instance marker is left in the window, whatever its
//     token: a slow peer that still works on the window keeps it;
//   - then the tier-2 row goes.
//
// A day's tier-1 row goes when none of its windows is left and the day is over plus the offset.
// Row deletes leave row tombstones in the day's and the year's partitions, so Node-0 then raises
// the scan checkpoints past them (compare-and-set from the version read before the scan): every
// later scan starts at the first live row and never reads those tombstones.
//
// Tiers 3 and 4 need no checkpoint. Their row deletes (instance markers, bucket rows) stay inside
// one window's partitions, at most one tombstone per instance (per bucket) of that window, and
// they are read only while the window is still listed in tier 2: once Node-0 deleted the window
// and moved the day's checkpoint past it, no scan opens those partitions again.
//
// Listing tier 2 anyway, it notes in the pass it returns the oldest window it leaves in the
// directory, whatever its token: a window nobody drains shows in Node-0's report.
func (s *Scanner) compactDirectory(ctx context.Context) (directoryPass, error) {
	if _, err := s.guard.CheckNode0(s.cfg.QueryTimeout); err != nil {
		if errors.Is(err, lease.ErrNotNode0) {
			return directoryPass{}, nil
		}
		return directoryPass{}, s.refused(err)
	}
	dir := directoryPass{node0: true}
	now := s.now()
	today := window.DateOf(now)
	first := today.AddDays(-s.cfg.LookbackDays)
	var failed error
	for y := min(first.Year, today.Year-1); y <= today.Year; y++ {
		err := s.compactYear(ctx, y, first, now, &dir)
		if s.stops(ctx, err) {
			return dir, err
		}
		failed = cmp.Or(failed, err)
	}
	return dir, failed
}

// compactYear compacts the days of one year's tier-1 partition (and the lookback days of that
// year that tier 1 does not list: their windows only). A day whose compaction failed is kept,
// and the checkpoint stays at or below it.
func (s *Scanner) compactYear(ctx context.Context, year int, lookbackFrom window.Date, now time.Time, dir *directoryPass) (failed error) {
	days, cp, err := s.liveDays(ctx, year, s.onNode0)
	if err != nil {
		return err
	}
	listed := map[window.Date]bool{}
	for _, d := range days {
		listed[d] = true
	}
	var unlisted []window.Date
	for d := lookbackFrom; !d.After(window.DateOf(now)); d = d.AddDays(1) {
		if d.Year == year && !listed[d] {
			unlisted = append(unlisted, d)
		}
	}
	for _, d := range unlisted {
		if _, err := s.compactDay(ctx, d, now, dir); err != nil {
			if s.stops(ctx, err) {
				return err
			}
			failed = cmp.Or(failed, err)
		}
	}

	var firstKept, lastDeleted *window.Date
	for _, d := range days {
		empty, err := s.compactDay(ctx, d, now, dir)
		if err == nil && empty && window.DeletableDay(d, now, s.cfg.MaxClockOffset) {
			var gone bool
			gone, err = s.deleteDay(ctx, d)
			if err == nil && gone {
				s.count(&s.stats.DaysDeleted)
				s.log.Info().Stringer("day", d).Msg("day deleted")
				lastDeleted = &d
				continue
			}
		}
		if s.stops(ctx, err) {
			return err
		}
		if err != nil {
			s.log.Warn().Err(err).Stringer("day", d).Msg("day not compacted this cycle")
			failed = cmp.Or(failed, err)
		}
		if firstKept == nil {
			firstKept = &d
		}
	}

	raised := cp.Date
	switch {
	case firstKept != nil:
		raised = *firstKept
	case lastDeleted != nil:
		raised = lastDeleted.AddDays(1)
		if raised.Year != year { // the checkpoint names a day of its own year
			raised = *lastDeleted
		}
	}
	if !raised.After(cp.Date) {
		return failed
	}
	return cmp.Or(s.onNode0(ctx, func(ctx context.Context) error {
		ok, err := s.store.SetDayCheckpoint(ctx, year, cp, raised)
		if err == nil && !ok {
			s.log.Debug().Int("year", year).Msg("day checkpoint changed under Node-0; raising it next cycle")
		}
		return err
	}), failed)
}

// compactDay deletes the windows of d that pass both gates and reports whether none is left; it
// notes the oldest it leaves in dir.
func (s *Scanner) compactDay(ctx context.Context, d window.Date, now time.Time, dir *directoryPass) (empty bool, err error) {
	ws, cp, err := s.liveWindows(ctx, d, s.onNode0)
	if err != nil {
		dir.left(d.Time()) // not listed: the day's start stands for its windows
		return false, err
	}
	var firstKept, lastDeleted, at *window.Window
	defer func() {
		switch {
		case firstKept != nil:
			dir.left(firstKept.Start())
		case err != nil && at != nil: // a failure at a window keeps it and every later one
			dir.left(at.Start())
		}
	}()
	for _, w := range ws {
		at = &w
		if !window.DeletableWindow(w, now, s.cfg.MaxClockOffset) { // gate 2
			// Windows are in order: this one and every later one are kept. An earlier window kept
			// for its instance markers stays the checkpoint, or no traversal would read it again.
			if firstKept == nil {
				firstKept = &w
			}
			break
		}
		gone, err := s.deleteWindow(ctx, w) // behind gate 1
		if err != nil {
			return false, err
		}
		if !gone {
			if firstKept == nil {
				firstKept = &w
			}
			continue
		}
		s.count(&s.stats.WindowsDeleted)
		s.log.Debug().Stringer("window", w).Msg("window deleted")
		lastDeleted = &w
	}
	at = nil

	raised := cp.Minute
	switch {
	case firstKept != nil:
		raised = firstKept.Minute
	case lastDeleted != nil:
		raised = min(lastDeleted.Minute+s.cfg.WindowMinutes, window.MinutesPerDay)
	}
	if raised > cp.Minute {
		if err := s.onNode0(ctx, func(ctx context.Context) error {
			ok, err := s.store.SetWindowCheckpoint(ctx, d, cp, raised)
			if err == nil && !ok {
				s.log.Debug().Stringer("day", d).Msg("window checkpoint changed under Node-0; raising it next cycle")
			}
			return err
		}); err != nil {
			return false, err
		}
	}
	return firstKept == nil, nil
}

// deleteWindow deletes a window row that passed gate 2 by a checked delete (docs/schema.md):
// under one guard check and one inflight scope it reads the write clock, runs gate 1 (no
// instance marker left in the window, whatever its token), deletes the row with a tombstone
// stamped max_clock_offset before that reading, and reads the row back. A late write (an
// import) publishes its instance marker before the window row: either gate 1 sees the marker, or
// the window row comes after the check, newer than the tombstone, and survives it. A window row
// written shortly before the check survives too, empty: read back, it is reported kept, so that
// the checkpoint stays at it (invariant 8) and a later pass deletes it. It reports whether the
// window is gone.
func (s *Scanner) deleteWindow(ctx context.Context, w window.Window) (bool, error) {
	var left, outlived bool
	err := s.onNode0(ctx, func(ctx context.Context) (err error) {
		checkedAt := s.cfg.WriteClock.Now()
		if left, err = s.store.HasInstances(ctx, w); err != nil || left { // gate 1: the whole ring, no token filter
			return err
		}
		if err := s.store.DeleteWindow(ctx, w, s.deleteTime(checkedAt)); err != nil {
			return err
		}
		outlived, err = s.store.HasWindow(ctx, w)
		return err
	})
	if err != nil || left {
		return false, err
	}
	if outlived {
		s.count(&s.stats.Outlived)
		s.log.Info().Stringer("window", w).Msg("window outlived its delete: written within max_clock_offset of it; a later pass deletes it")
		return false, nil
	}
	return true, nil
}

// deleteDay deletes a day row whose windows are all gone by a checked delete: the same steps as
// deleteWindow, the check listing the day's windows from its checkpoint (which a late writer
// lowers after writing its window row and before writing the day row again). It reports whether
// the day is gone.
func (s *Scanner) deleteDay(ctx context.Context, d window.Date) (bool, error) {
	var windows []window.Window
	var outlived bool
	err := s.onNode0(ctx, func(ctx context.Context) error {
		checkedAt := s.cfg.WriteClock.Now()
		cp, err := s.store.WindowCheckpoint(ctx, d)
		if err != nil {
			return err
		}
		if windows, err = s.store.ListWindows(ctx, d, cp.Minute); err != nil || len(windows) > 0 {
			return err
		}
		if err := s.store.DeleteDay(ctx, d, s.deleteTime(checkedAt)); err != nil {
			return err
		}
		outlived, err = s.store.HasDay(ctx, d)
		return err
	})
	switch {
	case err != nil:
		return false, err
	case len(windows) > 0:
		s.log.Info().Stringer("day", d).Stringer("window", windows[0]).Msg("day kept: a window appeared after its last one was deleted")
		return false, nil
	case outlived:
		s.count(&s.stats.Outlived)
		s.log.Info().Stringer("day", d).Msg("day outlived its delete: written within max_clock_offset of it; a later pass deletes it")
		return false, nil
	}
	return true, nil
}
