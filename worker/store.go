package worker

import (
	"context"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// The interfaces below are the queries the worker runs, defined here where they are used.
// *cassandra.Store satisfies all of them; unit tests of pure logic may use an in-memory fake.

// Directory reads the five tiers, always from a partition key (and, for tiers 1 and 2, from the
// scan checkpoint up, so that no scan wades through the row tombstones of deleted days and windows).
type Directory interface {
	// DayCheckpoint reads the year's tier-1 scan bound: no day row of the year is before it.
	DayCheckpoint(ctx context.Context, year int) (cassandra.DayCheckpoint, error)
	// ListDays lists the days of a year from from on, oldest first.
	ListDays(ctx context.Context, year int, from window.Date) ([]window.Date, error)
	// WindowCheckpoint reads the day's tier-2 scan bound: no window row of the day is below it.
	WindowCheckpoint(ctx context.Context, d window.Date) (cassandra.WindowCheckpoint, error)
	// ListWindows lists the windows of a day from fromMinute on, earliest first.
	ListWindows(ctx context.Context, d window.Date, fromMinute int) ([]window.Window, error)
	// ListInstances lists the instance markers of a window whose token lies in rg.
	ListInstances(ctx context.Context, w window.Window, rg lease.Range) ([]cassandra.Instance, error)
	// ListBuckets lists the bucket indexes of an instance in a window.
	ListBuckets(ctx context.Context, w window.Window, instanceID string) ([]int, error)
	// ReadBucketPage reads one page of a bucket; next is nil after the last page.
	ReadBucketPage(ctx context.Context, b cassandra.BucketKey, pageState []byte) (rows []cassandra.Transaction, next []byte, err error)
}

// DataCompactor deletes what a worker owns once it is finished: a bucket partition (one partition
// tombstone), its tier-4 row, and the tier-3 instance marker. Each delete's tombstone is stamped
// at (cassandra.CheckedDeleteTime): it hides only what was written at or before it.
type DataCompactor interface {
	DeleteBucketPartition(ctx context.Context, b cassandra.BucketKey, at time.Time) error
	DeleteBucket(ctx context.Context, w window.Window, instanceID string, bucket int, at time.Time) error
	DeleteInstance(ctx context.Context, w window.Window, instanceID string, at time.Time) error
}

// Markers are the STRICT execution markers.
type Markers interface {
	Marker(ctx context.Context, transactionID, span string) (cassandra.Marker, bool, error)
	MarkInProgress(ctx context.Context, transactionID, span, owner string, at time.Time, ttl time.Duration) error
	MarkCommitted(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error
	MarkDeadLettered(ctx context.Context, transactionID, span, owner string, at time.Time, retention time.Duration) error
	// SetFloor raises the step's floor to c (never lowers it): rows of the step below c are
	// finished without a call from then on. Written only after the copy at c exists.
	SetFloor(ctx context.Context, transactionID, span string, c cassandra.Copy, retention time.Duration) error
}

// DeadLetters keeps the failures given up on.
type DeadLetters interface {
	InsertDeadLetter(ctx context.Context, d cassandra.DeadLetter) error
}

// DirectoryCompactor is Node-0's: gate 1, the deletes of tier-2 and tier-1 rows, and the scan
// checkpoints raised past them.
type DirectoryCompactor interface {
	// HasInstances reports whether any instance marker is left in a window, across the whole
	// ring (gate 1).
	HasInstances(ctx context.Context, w window.Window) (bool, error)
	// DeleteWindow and DeleteDay stamp their tombstones at (see DataCompactor); HasWindow and
	// HasDay read a row back after its delete, which a row written within the clock bound of
	// the tombstone survives.
	DeleteWindow(ctx context.Context, w window.Window, at time.Time) error
	DeleteDay(ctx context.Context, d window.Date, at time.Time) error
	HasWindow(ctx context.Context, w window.Window) (bool, error)
	HasDay(ctx context.Context, d window.Date) (bool, error)
	// SetWindowCheckpoint and SetDayCheckpoint compare-and-set a checkpoint from the version read
	// before the scan whose result justifies the new value.
	SetWindowCheckpoint(ctx context.Context, d window.Date, prev cassandra.WindowCheckpoint, minute int) (bool, error)
	SetDayCheckpoint(ctx context.Context, year int, prev cassandra.DayCheckpoint, first window.Date) (bool, error)
}

// DirectoryWriter writes the rows of every tier: what re-recording a transient failure into a
// later window needs, top-down so that a crash never leaves a row its directory does not lead to.
type DirectoryWriter interface {
	InsertDay(ctx context.Context, d window.Date) error
	InsertWindow(ctx context.Context, w window.Window) error
	InsertInstance(ctx context.Context, w window.Window, instanceID string) error
	InsertBucket(ctx context.Context, w window.Window, instanceID string, bucket int) error
	InsertTransaction(ctx context.Context, b cassandra.BucketKey, t cassandra.Transaction) error
}

// Store is everything a Scanner needs from Cassandra.
type Store interface {
	Directory
	DataCompactor
	Markers
	DeadLetters
	DirectoryCompactor
	DirectoryWriter
}

var _ Store = (*cassandra.Store)(nil)
