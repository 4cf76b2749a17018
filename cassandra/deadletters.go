package cassandra

import (
	"context"
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
		t.AddedAt, t.AllocationKey, t.ImplType, t.Attempt, d.LastStatus, d.LastError, d.DeadAt, d.WorkerID)
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
		if err := sc.Scan(&d.Transaction.ID, &d.Bucket.InstanceID, &wd, &d.Bucket.Window.Minute, &d.Bucket.Bucket,
			&d.Transaction.AddedAt, &d.Transaction.AllocationKey, &d.Transaction.ImplType, &d.Transaction.Attempt,
			&d.LastStatus, &d.LastError, &d.DeadAt, &d.WorkerID); err != nil {
			return err
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
