package cassandra

import (
	"fmt"
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
	// Replay is the replay generation: 0 for a failure as its service recorded it, +1 each time
	// an operator replays the step's dead letter (a null cell, as writers that predate the
	// column leave it, reads as 0).
	Replay int
}

// Copy is where a row stands among the copies of its step: the rows of one step that a worker
// wrote again (attempt+1) or an operator replayed (replay+1, attempt 0).
func (t Transaction) Copy() Copy { return Copy{Replay: t.Replay, Attempt: t.Attempt} }

// Copy orders the copies of one step: by replay generation, then by attempt. The marker's floor
// is a Copy: every row of the step below it was handled, by a newer copy that exists.
type Copy struct {
	Replay  int
	Attempt int
}

// Less reports whether c comes before o.
func (c Copy) Less(o Copy) bool {
	if c.Replay != o.Replay {
		return c.Replay < o.Replay
	}
	return c.Attempt < o.Attempt
}

// String reads r<replay>/a<attempt>.
func (c Copy) String() string { return fmt.Sprintf("r%d/a%d", c.Replay, c.Attempt) }

// Marker states of es_execution_markers. Each has cells of its own (docs/schema.md), so that no
// write of one state can shadow another.
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

// Marker is one STRICT execution marker: the states of the step's executions, and its floor.
type Marker struct {
	// State is the first state that lives in the read order COMMITTED, DEAD_LETTERED,
	// IN_PROGRESS (empty when none does: only the floor is left, or nothing); Owner, UpdatedAt
	// and StateTTL are that state's. A COMMITTED reads first whatever was written after it: the
	// step ran, and nothing a stalled or duplicate copy writes later makes it look undone.
	State     string
	Owner     string
	UpdatedAt time.Time
	// InProgressOwner is the worker whose IN_PROGRESS lives, empty when none does, whichever
	// state reads first: the copy a replay wrote after a DEAD_LETTERED runs under it too.
	InProgressOwner string
	// Floor is the newest copy of the step known to exist (HasFloor); every older copy was
	// handled and is finished without a call. It lives in cells of its own, which IN_PROGRESS
	// never writes, so an execution that dies mid-call cannot take it away.
	Floor    Copy
	HasFloor bool
	// StateTTL and FloorTTL are the time the state and the floor have left before they expire
	// (0: no such cell). A row finished by a marker that expires soon must not stay behind it:
	// see Expiring.
	StateTTL, FloorTTL time.Duration
}

// Committed reports whether the step ran to success: nothing may execute it again.
func (m Marker) Committed() bool { return m.State == MarkerCommitted }

// Superseded reports whether a row at c was handled already: a newer copy of its step exists.
func (m Marker) Superseded(c Copy) bool { return m.HasFloor && c.Less(m.Floor) }

// Expiring reports whether the part of the marker that finishes a row at c (its COMMITTED or
// DEAD_LETTERED state, or its floor, in the order they are read) expires within d: a bucket
// kept that long could then run the row again.
func (m Marker) Expiring(c Copy, d time.Duration) bool {
	ttl := m.StateTTL
	if !m.Committed() && m.Superseded(c) {
		ttl = m.FloorTTL
	}
	return ttl > 0 && ttl < d
}

// DeadLetter is a failure given up on: its tier-5 address and metadata plus why and when.
type DeadLetter struct {
	Bucket      BucketKey
	Transaction Transaction
	LastStatus  int    // the last HTTP status, 0 when there was none (timeout, refused)
	LastError   string // the last error text
	DeadAt      time.Time
	WorkerID    string
	// ReplayedBy and ReplayedAt mark a dead letter an operator replayed (the replay's --id); empty
	// until then. A dead letter stays, marked, until purged.
	ReplayedBy string
	ReplayedAt time.Time
}

// DeadDay is the partition of the dead letter: the UTC day it was given up on.
func (d DeadLetter) DeadDay() window.Date { return window.DateOf(d.DeadAt) }

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
