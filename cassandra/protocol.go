package cassandra

import (
	"context"
	"fmt"

	"github.com/retryring/retryring/window"
)

// The checked deletes below are the directory side of the late-write protocol
// (docs/schema.md, "Deletion protocol"). A late writer publishes a path bottom-up: the rows a
// directory row leads to first, the directory row after. A deleter checks that the level below
// is empty, deletes, and checks again; if something appeared in between, it writes the row back.
// Between the two, every interleaving leaves the row present whenever the level below is not
// empty: either the second check sees the writer's lower row, or the writer's directory row was
// written after the delete and wins.
//
// None of them decides whether a deletion is due: the caller has passed its own gates (the
// guard, Node-0's role, the time gate of window.DeletableWindow / DeletableDay) first.

// DeleteInstanceChecked deletes the tier-3 marker of an instance whose buckets are all gone, and
// reports whether it is gone. When a bucket row is present before or right after the delete, the
// marker stays (or is written back) and it reports false: process that bucket first.
func (s *Store) DeleteInstanceChecked(ctx context.Context, w window.Window, instanceID string) (bool, error) {
	return s.deleteChecked(ctx,
		func(ctx context.Context) (bool, error) {
			bs, err := s.ListBuckets(ctx, w, instanceID)
			return len(bs) > 0, err
		},
		func(ctx context.Context) error { return s.DeleteInstance(ctx, w, instanceID) },
		func(ctx context.Context) error { return s.InsertInstance(ctx, w, instanceID) },
		fmt.Sprintf("instance %s of %s", instanceID, w))
}

// DeleteWindowChecked is Node-0's delete of a tier-2 row: gate 1 (no instance marker left in the
// window, across all tokens), the delete, and gate 1 again. It reports whether the window is gone.
func (s *Store) DeleteWindowChecked(ctx context.Context, w window.Window) (bool, error) {
	return s.deleteChecked(ctx,
		func(ctx context.Context) (bool, error) { return s.HasInstances(ctx, w) },
		func(ctx context.Context) error { return s.DeleteWindow(ctx, w) },
		func(ctx context.Context) error { return s.InsertWindow(ctx, w) },
		"window "+w.String())
}

// DeleteDayChecked is Node-0's delete of a tier-1 row: no window row left in the day (scanned
// from its checkpoint), the delete, and the same check again. It reports whether the day is gone.
func (s *Store) DeleteDayChecked(ctx context.Context, d window.Date) (bool, error) {
	return s.deleteChecked(ctx,
		func(ctx context.Context) (bool, error) {
			ws, _, err := s.ListLiveWindows(ctx, d)
			return len(ws) > 0, err
		},
		func(ctx context.Context) error { return s.DeleteDay(ctx, d) },
		func(ctx context.Context) error { return s.InsertDay(ctx, d) },
		"day "+d.String())
}

func (s *Store) deleteChecked(ctx context.Context, below func(context.Context) (bool, error),
	del, restore func(context.Context) error, what string,
) (bool, error) {
	busy, err := below(ctx)
	if err != nil || busy {
		return false, err
	}
	if err := del(ctx); err != nil {
		return false, fmt.Errorf("cassandra: delete %s: %w", what, err)
	}
	busy, err = below(ctx)
	if err != nil {
		// Unknown whether a late writer slipped in: restore, which is always safe (an empty
		// directory row is deleted again on a later pass).
		if rerr := restore(ctx); rerr != nil {
			return false, fmt.Errorf("cassandra: recheck after deleting %s: %w (and restore: %w)", what, err, rerr)
		}
		return false, fmt.Errorf("cassandra: recheck after deleting %s: %w", what, err)
	}
	if busy {
		if err := restore(ctx); err != nil {
			return false, fmt.Errorf("cassandra: restore %s after a late write: %w", what, err)
		}
		return false, nil
	}
	return true, nil
}
