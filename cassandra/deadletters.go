package cassandra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/window"
)

// InsertDeadLetter records a failure given up on, under the UTC day of d.DeadAt.
func (s *Store) InsertDeadLetter(ctx context.Context, d DeadLetter) error {
	r, b, t := s.ring, d.Bucket, d.Transaction
	err := s.exec(ctx, cqlInsertDeadLetter, r.Region, r.Cluster, r.Service, day(window.DateOf(d.DeadAt)),
		t.ID, b.InstanceID, day(b.Window.Day), b.Window.Minute, b.Bucket,
		t.AddedAt, t.AllocationKey, t.ImplType, t.Attempt, d.LastStatus, d.LastError, d.DeadAt, d.WorkerID, t.Replay)
	if err != nil {
		return fmt.Errorf("cassandra: dead-letter %s: %w", t.ID, err)
	}
	return nil
}

// ListDeadLetters lists the failures given up on during a UTC day, by transaction id.
func (s *Store) ListDeadLetters(ctx context.Context, deadDay window.Date) ([]DeadLetter, error) {
	r := s.ring
	var out []DeadLetter
	err := s.scan(ctx, cqlSelectDeadLetters, func(sc gocql.Scanner) error {
		var d DeadLetter
		var wd time.Time
		var replay *int
		var by *string
		var at, markedDeadAt *time.Time
		if err := sc.Scan(&d.Transaction.ID, &d.Bucket.InstanceID, &wd, &d.Bucket.Window.Minute, &d.Bucket.Bucket,
			&d.Transaction.AddedAt, &d.Transaction.AllocationKey, &d.Transaction.ImplType, &d.Transaction.Attempt,
			&d.LastStatus, &d.LastError, &d.DeadAt, &d.WorkerID, &replay, &by, &at, &markedDeadAt); err != nil {
			return err
		}
		if replay != nil {
			d.Transaction.Replay = *replay
		}
		if markOwn(d.DeadAt, by, markedDeadAt) {
			d.ReplayedBy = *by
			if at != nil {
				d.ReplayedAt = *at
			}
		}
		d.Bucket.Window.Day, d.Bucket.Window.Length = window.DateOf(wd), s.length
		out = append(out, d)
		return nil
	}, r.Region, r.Cluster, r.Service, day(deadDay))
	if err != nil {
		return nil, fmt.Errorf("cassandra: list dead letters of %s: %w", deadDay, err)
	}
	return out, nil
}

// markOwn reports whether a row whose dead letter was given up on at deadAt carries a replay mark
// of its own: by is set, and it was written for this dead_at. A mark written for an earlier
// dead_at outlived the row it marked: it was stamped by its Paxos ballot (Cassandra's clock)
// later than the step's next dead letter, written over the row by a worker whose clock is behind,
// so that insert's nulls did not clear it; it marks nothing. A mark from before replayed_dead_at
// existed (none recorded) counts, as it did when it was written.
func markOwn(deadAt time.Time, by *string, markedDeadAt *time.Time) bool {
	return by != nil && *by != "" && (markedDeadAt == nil || markedDeadAt.Equal(deadAt))
}

// MarkDeadLetterReplayed marks d as replayed by replayID at at. The dead letter stays. The mark
// is written only on the row d was read from (a compare-and-set on its dead_at) and names that
// dead_at, so that it counts for that dead letter alone: when the row is gone (purged) or was
// written again (the step given up on again), it returns ErrDeadLetterChanged, saying which, and
// writes nothing.
func (s *Store) MarkDeadLetterReplayed(ctx context.Context, d DeadLetter, replayID string, at time.Time) error {
	r, t := s.ring, d.Transaction
	if err := s.check(ctx); err != nil {
		return err
	}
	prev := map[string]any{}
	applied, err := s.query(ctx, cqlMarkDeadLetterReplayed, compareAndSet, replayID, at, d.DeadAt,
		r.Region, r.Cluster, r.Service, day(d.DeadDay()), t.ID, t.ImplType, d.DeadAt).MapScanCAS(prev)
	switch {
	case err != nil:
		return fmt.Errorf("cassandra: mark dead letter %s/%s replayed: %w", t.ID, t.ImplType, err)
	case !applied:
		what := "purged"
		if now, ok := prev["dead_at"].(time.Time); ok && !now.IsZero() {
			what = "given up on again at " + now.UTC().Format(time.RFC3339Nano)
		}
		return fmt.Errorf("%w: %s/%s, given up on at %s, was %s", ErrDeadLetterChanged, t.ID, t.ImplType,
			d.DeadAt.UTC().Format(time.RFC3339Nano), what)
	}
	return nil
}

// DeleteDeadLetter deletes one dead letter (a row tombstone in its day's partition).
func (s *Store) DeleteDeadLetter(ctx context.Context, d DeadLetter) error {
	r := s.ring
	if err := s.exec(ctx, cqlDeleteDeadLetter, r.Region, r.Cluster, r.Service, day(d.DeadDay()), d.Transaction.ID, d.Transaction.ImplType); err != nil {
		return fmt.Errorf("cassandra: delete dead letter %s/%s: %w", d.Transaction.ID, d.Transaction.ImplType, err)
	}
	return nil
}

// DeleteDeadLetterDay deletes every dead letter given up on during a UTC day: one partition
// tombstone.
func (s *Store) DeleteDeadLetterDay(ctx context.Context, deadDay window.Date) error {
	r := s.ring
	if err := s.exec(ctx, cqlDeleteDeadLetterDay, r.Region, r.Cluster, r.Service, day(deadDay)); err != nil {
		return fmt.Errorf("cassandra: delete dead letters of %s: %w", deadDay, err)
	}
	return nil
}

// StartReplayRun records the first start of replay run id (at most once: Paxos) and returns the
// start on record, which is at when this call made it, or the earlier start of a run of that id.
func (s *Store) StartReplayRun(ctx context.Context, id string, at time.Time) (time.Time, error) {
	r := s.ring
	if _, err := s.cas(ctx, cqlInsertReplayRun, r.Region, r.Cluster, r.Service, id, at); err != nil {
		return time.Time{}, fmt.Errorf("cassandra: start replay run %q: %w", id, err)
	}
	var started time.Time
	found := false
	err := s.scan(ctx, cqlSelectReplayRun, func(sc gocql.Scanner) error {
		found = true
		return sc.Scan(&started)
	}, r.Region, r.Cluster, r.Service, id)
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("cassandra: read replay run %q: %w", id, err)
	case !found:
		return time.Time{}, fmt.Errorf("cassandra: replay run %q not found after its insert", id)
	}
	return started, nil
}

// ReplayMark reads the replay mark of the row d was read from, at the Store's serial level: after
// a mark whose outcome is unknown (a compare-and-set that timed out may still be accepted), a
// serial read finishes any Paxos round in progress on the row first, so what it returns is the
// outcome. current is false when the row is not d's any more (purged, or given up on again); by
// is the replay id that marked it ("" for none, or for a mark written for another dead_at).
func (s *Store) ReplayMark(ctx context.Context, d DeadLetter) (by string, current bool, err error) {
	r, t := s.ring, d.Transaction
	if err := s.check(ctx); err != nil {
		return "", false, err
	}
	var deadAt time.Time
	var replayedBy *string
	var markedDeadAt *time.Time
	err = s.query(ctx, cqlSelectDeadLetterMark, read, r.Region, r.Cluster, r.Service, day(d.DeadDay()), t.ID, t.ImplType).
		Consistency(gocql.Consistency(s.serial)).Scan(&deadAt, &replayedBy, &markedDeadAt)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("cassandra: read the replay mark of dead letter %s/%s: %w", t.ID, t.ImplType, err)
	}
	if markOwn(deadAt, replayedBy, markedDeadAt) {
		by = *replayedBy
	}
	return by, deadAt.Equal(d.DeadAt), nil
}
