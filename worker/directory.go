package worker

import (
	"context"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
)

// The scans of tiers 1 and 2 start at their checkpoints. Each read is its own guarded query:
// the checkpoint first, then the rows from it on. A caller that raises the checkpoint afterwards
// (Node-0) passes the checkpoint it read back to the compare-and-set, so that a late writer that
// lowered it meanwhile makes the raise fail instead of hiding the late writer's row.

// liveDays lists the days of year at or after its checkpoint; guard runs each query.
func (s *Scanner) liveDays(ctx context.Context, year int, guard func(context.Context, func(context.Context) error) error) ([]window.Date, cassandra.DayCheckpoint, error) {
	var cp cassandra.DayCheckpoint
	if err := guard(ctx, func(ctx context.Context) (err error) {
		cp, err = s.store.DayCheckpoint(ctx, year)
		return err
	}); err != nil {
		return nil, cp, err
	}
	var days []window.Date
	err := guard(ctx, func(ctx context.Context) (err error) {
		days, err = s.store.ListDays(ctx, year, cp.Date)
		return err
	})
	return days, cp, err
}

// liveWindows lists the windows of d at or after its checkpoint; guard runs each query.
func (s *Scanner) liveWindows(ctx context.Context, d window.Date, guard func(context.Context, func(context.Context) error) error) ([]window.Window, cassandra.WindowCheckpoint, error) {
	var cp cassandra.WindowCheckpoint
	if err := guard(ctx, func(ctx context.Context) (err error) {
		cp, err = s.store.WindowCheckpoint(ctx, d)
		return err
	}); err != nil {
		return nil, cp, err
	}
	var ws []window.Window
	err := guard(ctx, func(ctx context.Context) (err error) {
		ws, err = s.store.ListWindows(ctx, d, cp.Minute)
		return err
	})
	return ws, cp, err
}
