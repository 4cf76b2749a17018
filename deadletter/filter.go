package deadletter

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
)

// Filter selects dead letters. The zero value of a field selects everything.
type Filter struct {
	// Since and Until bound the time a failure was given up on: Since ≤ dead_at < Until. Until
	// is required (the CLI gives the clock's now); Since defaults to DefaultSince before Until.
	Since, Until time.Time
	// Impl, Status and Instance keep dead letters whose step type, last status or instance id is
	// one of those listed.
	Impl     []string
	Status   []int
	Instance []string
}

// DefaultSince is how far back a filter without Since looks.
const DefaultSince = 30 * 24 * time.Hour

// maxDays bounds the days a filter may span: one partition read per day.
const maxDays = 3660

func (f Filter) since() time.Time {
	if f.Since.IsZero() {
		return f.Until.Add(-DefaultSince)
	}
	return f.Since
}

// Validate reports a filter that selects nothing by construction or spans too many days.
func (f Filter) Validate() error {
	switch {
	case f.Until.IsZero():
		return fmt.Errorf("%w: no upper bound of the time range", ErrFilter)
	case !f.since().Before(f.Until):
		return fmt.Errorf("%w: since %s is not before until %s", ErrFilter, f.since().UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339))
	case f.Until.Sub(f.since()) > maxDays*24*time.Hour:
		return fmt.Errorf("%w: the time range spans more than %d days", ErrFilter, maxDays)
	}
	return nil
}

// Match reports whether d is selected (its time included).
func (f Filter) Match(d cassandra.DeadLetter) bool {
	switch {
	case d.DeadAt.Before(f.since()) || !d.DeadAt.Before(f.Until):
		return false
	case len(f.Impl) > 0 && !slices.Contains(f.Impl, d.Transaction.ImplType):
		return false
	case len(f.Status) > 0 && !slices.Contains(f.Status, d.LastStatus):
		return false
	case len(f.Instance) > 0 && !slices.Contains(f.Instance, d.Bucket.InstanceID):
		return false
	}
	return true
}

// days lists the UTC days the filter's time range touches, oldest first.
func (f Filter) days() []window.Date {
	var out []window.Date
	last := window.DateOf(f.Until.Add(-time.Nanosecond))
	for d := window.DateOf(f.since()); !d.After(last); d = d.AddDays(1) {
		out = append(out, d)
	}
	return out
}

// Lister reads dead letters by day; *cassandra.Store is one.
type Lister interface {
	ListDeadLetters(ctx context.Context, deadDay window.Date) ([]cassandra.DeadLetter, error)
}

// List returns the dead letters f selects, oldest day first, by transaction id within a day.
func List(ctx context.Context, st Lister, f Filter) ([]cassandra.DeadLetter, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []cassandra.DeadLetter
	for _, d := range f.days() {
		ds, err := st.ListDeadLetters(ctx, d)
		if err != nil {
			return out, err
		}
		for _, dl := range ds {
			if f.Match(dl) {
				out = append(out, dl)
			}
		}
	}
	return out, nil
}
