package cassandra

import (
	"time"

	"github.com/retryring/retryring/window"
)

// Instance is one tier-3 marker: a regular node's instance id and its Murmur3 token.
type Instance struct {
	ID    string
	Token int64
}

// BucketKey names one tier-5 partition: a bucket of one instance in one window.
type BucketKey struct {
	Window     window.Window
	InstanceID string
	Bucket     int
}

// Transaction is one tier-5 row: the metadata of a failed saga step, never its payload.
type Transaction struct {
	ID            string    // transaction_id: the key into the primary event store
	AddedAt       time.Time // added_datetime: when the failure was recorded
	AllocationKey string    // allocation_key
	ImplType      string    // stacksaga_impl_type: names the step to retry
	Attempt       int       // attempt: 0 for a first failure, +1 per re-recording
}

// Marker states of es_execution_markers.
const (
	// MarkerInProgress is written before an execution, with a TTL of its timeout plus margin.
	MarkerInProgress = "IN_PROGRESS"
	// MarkerCommitted is written after success: never execute this step again.
	MarkerCommitted = "COMMITTED"
	// MarkerDeadLettered is written after the step's dead letter: it was given up on, so a copy
	// of its row still in the directory (a kept bucket, a re-recording whose source row stayed)
	// is finished without being executed again. Written only once the dead letter is stored.
	MarkerDeadLettered = "DEAD_LETTERED"
)

// DefaultMarkerRetention is how long a COMMITTED or DEAD_LETTERED marker is kept: longer than any transaction
// stays in the directory.
const DefaultMarkerRetention = 7 * 24 * time.Hour

// Marker is one STRICT execution marker.
type Marker struct {
	State     string
	Owner     string
	UpdatedAt time.Time
}

// DeadLetter is a failure given up on: its tier-5 address and metadata plus why and when.
type DeadLetter struct {
	Bucket      BucketKey
	Transaction Transaction
	LastStatus  int    // the last HTTP status, 0 when there was none (timeout, refused)
	LastError   string // the last error text
	DeadAt      time.Time
	WorkerID    string
}

// WindowCheckpoint is a day's scan bound for tier 2: no window row of the day is below Minute.
// Version changes on every compare-and-set; a missing row reads as Minute 0, Version 0.
type WindowCheckpoint struct {
	Minute  int
	Version int64
	Exists  bool
}

// DayCheckpoint is a year's scan bound for tier 1: no day row of the year is before Date.
// A missing row reads as January 1st, Version 0.
type DayCheckpoint struct {
	Date    window.Date
	Version int64
	Exists  bool
}
