package cassandra

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/window"
)

// Checkpoints bound the scans of tier 1 and tier 2 from below (docs/schema.md, "Scan
// checkpoints"). Node-0 deletes window rows one by one from a day's partition and day rows one
// by one from a year's partition; each delete is a row tombstone that a scan from the start of
// the partition would read again on every pass. A checkpoint says "no live row below here", so
// scans start at it and never touch those tombstones.
//
// Both sides change a checkpoint only by compare-and-set on its version:
//   - Node-0 raises it past the rows it deleted, from the version it read before its scan.
//   - A late writer (one writing into a window whose time has come, e.g. an import) lowers it
//     to its window, and always bumps the version even when the value needs no change, so that a
//     Node-0 raise computed from a scan that missed the new row fails and is redone.

// checkpointCASAttempts bounds the read-then-compare-and-set loop of a lowering writer.
const checkpointCASAttempts = 8

// WindowCheckpoint reads the tier-2 scan bound of a day (Minute 0 when there is none).
func (s *Store) WindowCheckpoint(ctx context.Context, d window.Date) (WindowCheckpoint, error) {
	r := s.ring
	var cp WindowCheckpoint
	err := s.scan(ctx, cqlSelectWindowCheckpoint, func(sc gocql.Scanner) error {
		cp.Exists = true
		return sc.Scan(&cp.Minute, &cp.Version)
	}, r.Region, r.Cluster, r.Service, day(d))
	if err != nil {
		return WindowCheckpoint{}, fmt.Errorf("cassandra: read window checkpoint of %s: %w", d, err)
	}
	return cp, nil
}

// SetWindowCheckpoint moves the day's checkpoint to minute if it is still at prev's version,
// and reports whether it did. Node-0 uses it to raise the bound past windows it deleted, with
// prev read before the scan that found them.
func (s *Store) SetWindowCheckpoint(ctx context.Context, d window.Date, prev WindowCheckpoint, minute int) (bool, error) {
	r := s.ring
	var applied bool
	var err error
	if !prev.Exists {
		applied, err = s.cas(ctx, cqlInsertWindowCheckpoint, r.Region, r.Cluster, r.Service, day(d), minute, int64(1))
	} else {
		applied, err = s.cas(ctx, cqlUpdateWindowCheckpoint, minute, prev.Version+1, r.Region, r.Cluster, r.Service, day(d), prev.Version)
	}
	if err != nil {
		return false, fmt.Errorf("cassandra: set window checkpoint of %s: %w", d, err)
	}
	return applied, nil
}

// LowerWindowCheckpoint makes sure no scan of the day starts after minute, and bumps the
// checkpoint's version whatever its value (see above). Late writers call it after writing their
// tier-2 row.
func (s *Store) LowerWindowCheckpoint(ctx context.Context, d window.Date, minute int) error {
	for range checkpointCASAttempts {
		cp, err := s.WindowCheckpoint(ctx, d)
		if err != nil {
			return err
		}
		applied, err := s.SetWindowCheckpoint(ctx, d, cp, min(cp.Minute, minute))
		if err != nil || applied {
			return err
		}
	}
	return fmt.Errorf("%w: window checkpoint of %s", ErrCheckpointContended, d)
}

// ListLiveWindows reads the day's checkpoint and lists the windows from it on: the scan every
// traversal of tier 2 should use. The checkpoint is returned for Node-0's next SetWindowCheckpoint.
func (s *Store) ListLiveWindows(ctx context.Context, d window.Date) ([]window.Window, WindowCheckpoint, error) {
	cp, err := s.WindowCheckpoint(ctx, d)
	if err != nil {
		return nil, WindowCheckpoint{}, err
	}
	ws, err := s.ListWindows(ctx, d, cp.Minute)
	return ws, cp, err
}

// DayCheckpoint reads the tier-1 scan bound of a year (January 1st when there is none).
func (s *Store) DayCheckpoint(ctx context.Context, year int) (DayCheckpoint, error) {
	r := s.ring
	cp := DayCheckpoint{Date: window.FirstOfYear(year)}
	err := s.scan(ctx, cqlSelectDayCheckpoint, func(sc gocql.Scanner) error {
		var t time.Time
		if err := sc.Scan(&t, &cp.Version); err != nil {
			return err
		}
		cp.Exists, cp.Date = true, window.DateOf(t)
		return nil
	}, r.Region, r.Cluster, r.Service, year)
	if err != nil {
		return DayCheckpoint{}, fmt.Errorf("cassandra: read day checkpoint of %d: %w", year, err)
	}
	return cp, nil
}

// SetDayCheckpoint moves the year's checkpoint to first if it is still at prev's version, and
// reports whether it did. first must be a day of year.
func (s *Store) SetDayCheckpoint(ctx context.Context, year int, prev DayCheckpoint, first window.Date) (bool, error) {
	r := s.ring
	var applied bool
	var err error
	if !prev.Exists {
		applied, err = s.cas(ctx, cqlInsertDayCheckpoint, r.Region, r.Cluster, r.Service, year, day(first), int64(1))
	} else {
		applied, err = s.cas(ctx, cqlUpdateDayCheckpoint, day(first), prev.Version+1, r.Region, r.Cluster, r.Service, year, prev.Version)
	}
	if err != nil {
		return false, fmt.Errorf("cassandra: set day checkpoint of %d: %w", year, err)
	}
	return applied, nil
}

// LowerDayCheckpoint makes sure no scan of d's year starts after d, and bumps the version.
func (s *Store) LowerDayCheckpoint(ctx context.Context, d window.Date) error {
	for range checkpointCASAttempts {
		cp, err := s.DayCheckpoint(ctx, d.Year)
		if err != nil {
			return err
		}
		first := cp.Date
		if d.Before(first) {
			first = d
		}
		applied, err := s.SetDayCheckpoint(ctx, d.Year, cp, first)
		if err != nil || applied {
			return err
		}
	}
	return fmt.Errorf("%w: day checkpoint of %d", ErrCheckpointContended, d.Year)
}

// ListLiveDays reads the year's checkpoint and lists the days from it on, oldest first.
func (s *Store) ListLiveDays(ctx context.Context, year int) ([]window.Date, DayCheckpoint, error) {
	cp, err := s.DayCheckpoint(ctx, year)
	if err != nil {
		return nil, DayCheckpoint{}, err
	}
	ds, err := s.ListDays(ctx, year, cp.Date)
	return ds, cp, err
}
