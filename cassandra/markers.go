package cassandra

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"
)

// Marker reads the STRICT marker of a step (span) of a transaction of the Store's service.
//
// Each state has cells of its own (docs/schema.md, "Execution markers"), so a late or duplicate
// write of one state never shadows another; the marker reads them in the order COMMITTED,
// DEAD_LETTERED, IN_PROGRESS (the floor, in its own cells too, is weighed by the caller between
// COMMITTED and DEAD_LETTERED). The state a release before the per-state cells wrote into
// execution_state still counts, for the one retention period it lives, wherever the new cells
// of the same state are empty.
func (s *Store) Marker(ctx context.Context, transactionID, span string) (Marker, bool, error) {
	var m Marker
	found := false
	err := s.scan(ctx, cqlSelectMarker, func(sc gocql.Scanner) error {
		found = true
		var committed, deadLettered, inProgress, legacy markerCells
		var legacyState string
		var replay, attempt, floorTTL *int
		if err := sc.Scan(
			&committed.owner, &committed.at, &committed.ttl,
			&deadLettered.owner, &deadLettered.at, &deadLettered.ttl,
			&inProgress.owner, &inProgress.at, &inProgress.ttl,
			&legacyState, &legacy.owner, &legacy.at, &legacy.ttl,
			&replay, &attempt, &floorTTL); err != nil {
			return err
		}
		switch legacyState {
		case MarkerCommitted:
			committed = committed.or(legacy)
		case MarkerDeadLettered:
			deadLettered = deadLettered.or(legacy)
		case MarkerInProgress:
			inProgress = inProgress.or(legacy)
		}
		for _, c := range []struct {
			state string
			cells markerCells
		}{{MarkerCommitted, committed}, {MarkerDeadLettered, deadLettered}, {MarkerInProgress, inProgress}} {
			if c.cells.set() {
				m.State, m.Owner, m.UpdatedAt, m.StateTTL = c.state, c.cells.owner, c.cells.at, seconds(c.cells.ttl)
				break
			}
		}
		m.InProgressOwner = inProgress.owner
		if replay != nil && attempt != nil {
			m.Floor, m.HasFloor = Copy{Replay: *replay, Attempt: *attempt}, true
		}
		m.FloorTTL = seconds(floorTTL)
		return nil
	}, s.ring.Service, transactionID, span)
	if err != nil {
		return Marker{}, false, fmt.Errorf("cassandra: read marker %s/%s: %w", transactionID, span, err)
	}
	return m, found, nil
}

// markerCells are the owner, time and TTL of one state of a marker as read.
type markerCells struct {
	owner string
	at    time.Time
	ttl   *int
}

// set reports whether the state lives: every write of a state names its owner.
func (c markerCells) set() bool { return c.owner != "" }

// or is c, or legacy when c is not set.
func (c markerCells) or(legacy markerCells) markerCells {
	if c.set() {
		return c
	}
	return legacy
}

// MarkInProgress writes IN_PROGRESS with the lease owner before an execution. ttl is the
// execution timeout plus margin: a worker that dies mid-call leaves a marker that expires. Its
// cells are its own: however late it lands, and when it expires, it leaves COMMITTED and
// DEAD_LETTERED (and a COMMITTED a release before the per-state cells wrote) as they were.
func (s *Store) MarkInProgress(ctx context.Context, transactionID, span, owner string, at time.Time, ttl time.Duration) error {
	return s.mark(ctx, cqlMarkInProgress, transactionID, span, MarkerInProgress, owner, at, ttl)
}

// MarkCommitted writes COMMITTED after a success, kept for retention (DefaultMarkerRetention
// when zero): while it lives, the step is never executed again, whatever IN_PROGRESS or
// DEAD_LETTERED a stalled or duplicate copy writes after it.
func (s *Store) MarkCommitted(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error {
	if retention == 0 {
		retention = DefaultMarkerRetention
	}
	return s.mark(ctx, cqlMarkCommitted, transactionID, span, MarkerCommitted, owner, at, retention)
}

// MarkDeadLettered writes DEAD_LETTERED after the step's dead letter was stored (and its floor
// raised past every copy of the generation), kept for retention (DefaultMarkerRetention when
// zero). The floor is what keeps the step's copies from running again; the state tells people,
// and keeps steps dead-lettered before floors existed from running. A replay moves the floor to
// its new generation, whose copy then runs although the state still reads DEAD_LETTERED. A
// COMMITTED of the step still reads first: a duplicate copy given up on after another copy
// succeeded does not make the step look undone.
func (s *Store) MarkDeadLettered(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error {
	if retention == 0 {
		retention = DefaultMarkerRetention
	}
	return s.mark(ctx, cqlMarkDeadLettered, transactionID, span, MarkerDeadLettered, owner, at, retention)
}

func (s *Store) mark(ctx context.Context, stmt, transactionID, span, state, owner string, at time.Time, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: marker TTL %v", ErrConfig, ttl)
	}
	if owner == "" {
		return fmt.Errorf("%w: %s marker without an owner", ErrConfig, state)
	}
	secs := int((ttl + time.Second - 1) / time.Second) // round up: never shorter than asked
	if err := s.exec(ctx, stmt, secs, owner, at, s.ring.Service, transactionID, span); err != nil {
		return fmt.Errorf("cassandra: mark %s/%s %s: %w", transactionID, span, state, err)
	}
	return nil
}

// SetFloor raises the step's floor to c, kept for retention (DefaultMarkerRetention when zero):
// from then on every row of the step below c is finished without a call. It is written only
// once the copy at c exists (or, for a dead letter, once nothing below c may run again).
//
// The write's timestamp is c's order, not the clock, so the floor never goes down: a late
// floor write for an older copy loses to the newer one already there, as Cassandra keeps the
// cell with the higher timestamp. This is why markers are never deleted: a deletion at a clock
// timestamp would shadow every later floor write of the step.
func (s *Store) SetFloor(ctx context.Context, transactionID, span string, c Copy, retention time.Duration) error {
	if retention == 0 {
		retention = DefaultMarkerRetention
	}
	if c.Replay < 0 || c.Attempt < 0 {
		return fmt.Errorf("%w: floor %v", ErrConfig, c)
	}
	secs := int((retention + time.Second - 1) / time.Second)
	err := s.exec(ctx, cqlSetFloor, secs, floorTimestamp(c), c.Replay, c.Attempt, s.ring.Service, transactionID, span)
	if err != nil {
		return fmt.Errorf("cassandra: floor %s/%s %v: %w", transactionID, span, c, err)
	}
	return nil
}

// floorTimestamp orders floor writes by copy: replay generation in the high bits, attempt in the
// low 32, plus one so that no write carries timestamp 0.
func floorTimestamp(c Copy) int64 { return (int64(c.Replay)<<32 | int64(uint32(c.Attempt))) + 1 }

// seconds reads a TTL() column: nil (no cell, or no TTL) is 0.
func seconds(ttl *int) time.Duration {
	if ttl == nil {
		return 0
	}
	return time.Duration(*ttl) * time.Second
}
