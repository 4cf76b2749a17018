package cassandra

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"
)

// Marker reads the STRICT marker of a step (span) of a transaction of the Store's service.
func (s *Store) Marker(ctx context.Context, transactionID, span string) (Marker, bool, error) {
	var m Marker
	found := false
	err := s.scan(ctx, cqlSelectMarker, func(sc gocql.Scanner) error {
		found = true
		return sc.Scan(&m.State, &m.Owner, &m.UpdatedAt)
	}, s.ring.Service, transactionID, span)
	if err != nil {
		return Marker{}, false, fmt.Errorf("cassandra: read marker %s/%s: %w", transactionID, span, err)
	}
	return m, found, nil
}

// MarkInProgress writes IN_PROGRESS with the lease owner before an execution. ttl is the
// execution timeout plus margin: a worker that dies mid-call leaves a marker that expires.
func (s *Store) MarkInProgress(ctx context.Context, transactionID, span, owner string, at time.Time, ttl time.Duration) error {
	return s.mark(ctx, transactionID, span, MarkerInProgress, owner, at, ttl)
}

// MarkCommitted writes COMMITTED after a success, kept for retention (DefaultMarkerRetention
// when zero): while it lives, the step is never executed again.
func (s *Store) MarkCommitted(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error {
	if retention == 0 {
		retention = DefaultMarkerRetention
	}
	return s.mark(ctx, transactionID, span, MarkerCommitted, owner, at, retention)
}

// MarkDeadLettered writes DEAD_LETTERED after the step's dead letter was stored, kept for
// retention (DefaultMarkerRetention when zero): while it lives, the step is not executed again.
// Replaying a dead letter is an operator's act: delete this marker, then record the transaction
// again (recorded again with the marker in place, the step is finished without a call).
func (s *Store) MarkDeadLettered(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error {
	if retention == 0 {
		retention = DefaultMarkerRetention
	}
	return s.mark(ctx, transactionID, span, MarkerDeadLettered, owner, at, retention)
}

func (s *Store) mark(ctx context.Context, transactionID, span, state, owner string, at time.Time, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: marker TTL %v", ErrConfig, ttl)
	}
	secs := int((ttl + time.Second - 1) / time.Second) // round up: never shorter than asked
	if err := s.exec(ctx, cqlInsertMarker, s.ring.Service, transactionID, span, state, owner, at, secs); err != nil {
		return fmt.Errorf("cassandra: mark %s/%s %s: %w", transactionID, span, state, err)
	}
	return nil
}
