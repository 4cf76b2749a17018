package cassandra

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// The checked deletes below are the directory side of the late-write protocol
// (docs/schema.md, "Checked deletes"), for a deleter that runs them as one call (tools, tests of
// the protocol); the worker runs the same steps one by one, under one guard check. A late writer
// publishes a path bottom-up: the rows a directory row leads to first, the directory row after.
// A deleter reads its clock, checks that the level below is empty, and deletes with a tombstone
// stamped CheckedDeleteTime(that reading, maxClockOffset). No interleaving hides a late row:
// either the check sees the writer's lower row and nothing is deleted, or the writer's
// directory row was written after the check, so its timestamp (a clock within the bound, read
// after the deleter's) is newer than the tombstone and the row survives. Nothing is written
// back: a restore needs a second check, and a lease can end between the two.
//
// A row written shortly before the check (within the bound of the tombstone) survives the
// delete too, empty: each of these reads the row back and reports it as not gone, and a later
// call, once the bound has passed, deletes it.
//
// None of them decides whether a deletion is due: the caller has passed its own gates (the
// guard, Node-0's role, the time gate of window.DeletableWindow / DeletableDay) first.

// DeleteInstanceChecked deletes the tier-3 marker of an instance whose buckets are all gone, and
// reports whether it is gone. A bucket row keeps the marker: process that bucket first.
func (s *Store) DeleteInstanceChecked(ctx context.Context, w window.Window, instanceID string, maxClockOffset time.Duration) (bool, error) {
	return s.deleteChecked(ctx, maxClockOffset,
		func(ctx context.Context) (bool, error) {
			bs, err := s.ListBuckets(ctx, w, instanceID)
			return len(bs) > 0, err
		},
		func(ctx context.Context, at time.Time) error { return s.DeleteInstance(ctx, w, instanceID, at) },
		func(ctx context.Context) (bool, error) {
			tok := Token(instanceID)
			in, err := s.ListInstances(ctx, w, lease.Range{Start: tok, End: tok})
			return slices.ContainsFunc(in, func(i Instance) bool { return i.ID == instanceID }), err
		},
		fmt.Sprintf("instance %s of %s", instanceID, w))
}

// DeleteWindowChecked is Node-0's delete of a tier-2 row behind gate 1 (no instance marker left
// in the window, across all tokens). It reports whether the window is gone.
func (s *Store) DeleteWindowChecked(ctx context.Context, w window.Window, maxClockOffset time.Duration) (bool, error) {
	return s.deleteChecked(ctx, maxClockOffset,
		func(ctx context.Context) (bool, error) { return s.HasInstances(ctx, w) },
		func(ctx context.Context, at time.Time) error { return s.DeleteWindow(ctx, w, at) },
		func(ctx context.Context) (bool, error) { return s.HasWindow(ctx, w) },
		"window "+w.String())
}

// DeleteDayChecked is Node-0's delete of a tier-1 row with no window row left in the day
// (scanned from its checkpoint). It reports whether the day is gone.
func (s *Store) DeleteDayChecked(ctx context.Context, d window.Date, maxClockOffset time.Duration) (bool, error) {
	return s.deleteChecked(ctx, maxClockOffset,
		func(ctx context.Context) (bool, error) {
			ws, _, err := s.ListLiveWindows(ctx, d)
			return len(ws) > 0, err
		},
		func(ctx context.Context, at time.Time) error { return s.DeleteDay(ctx, d, at) },
		func(ctx context.Context) (bool, error) { return s.HasDay(ctx, d) },
		"day "+d.String())
}

func (s *Store) deleteChecked(ctx context.Context, maxClockOffset time.Duration,
	below func(context.Context) (bool, error), del func(context.Context, time.Time) error,
	still func(context.Context) (bool, error), what string,
) (bool, error) {
	checkedAt := s.stampNow() // before the check: see above
	busy, err := below(ctx)
	if err != nil || busy {
		return false, err
	}
	if err := del(ctx, CheckedDeleteTime(checkedAt, maxClockOffset)); err != nil {
		return false, fmt.Errorf("cassandra: delete %s: %w", what, err)
	}
	left, err := still(ctx)
	if err != nil {
		return false, fmt.Errorf("cassandra: read back %s after its delete: %w", what, err)
	}
	return !left, nil
}
