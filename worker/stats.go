package worker

import (
	"reflect"
	"sync/atomic"
)

// Stats are the worker's counters since it was built. Every field only grows.
type Stats struct {
	Cycles uint64 // traversal cycles completed or stopped
	// Executed counts calls to the Executor; Done, Transient and Permanent split them by outcome.
	Executed  uint64
	Done      uint64
	Transient uint64
	Permanent uint64
	// Committed counts COMMITTED markers written after a successful execution.
	Committed uint64
	// Rerecorded counts transient failures recorded again into a later window.
	Rerecorded uint64
	// DeadLettered counts failures given up on: permanent ones and transient ones out of attempts.
	DeadLettered uint64
	// SkippedCommitted counts rows not executed because their step's marker was COMMITTED.
	SkippedCommitted uint64
	// SkippedSuperseded counts rows finished without an execution because a newer copy of their
	// step exists (the marker's floor is above them): they were recorded again or given up on.
	SkippedSuperseded uint64
	// SkippedDeadLettered counts rows finished without an execution because their step's marker
	// was DEAD_LETTERED with no floor (a step given up on before floors were written).
	SkippedDeadLettered uint64
	// NotSent counts executions that never reached the downstream (the executor refused to send
	// past the deadline): no outcome, no attempt used, the row stays.
	NotSent uint64
	// Carried counts rows of a bucket kept longer than marker retention − 1 day, recorded again
	// unchanged (same attempt, no call) into the next window so that their markers outlive them.
	Carried uint64
	// SkippedInProgress counts rows left for a later pass because another worker's IN_PROGRESS
	// marker on the step was still alive.
	SkippedInProgress uint64
	// SkippedBusy counts rows left for a later pass because the same step was being executed by
	// this worker from another bucket at that moment.
	SkippedBusy uint64
	// BucketsDeleted counts bucket partitions deleted (each with its tier-4 row); BucketsKept the
	// buckets left in place because not every row in them finished.
	BucketsDeleted uint64
	BucketsKept    uint64
	// InstancesScanned counts tier-3 instance markers visited (listed in a leased range, their
	// buckets listed and streamed), once per visit: a pending instance is visited every cycle.
	InstancesScanned uint64
	// InstancesRescannedStart and InstancesRescannedHandover count the visits of instances whose
	// token this process had not covered in that window before (rescans in rescan.go): by its
	// first visits after a start, and after a handover gave it the token. Each is work that
	// another owner, or an earlier launch of this worker, may have begun.
	InstancesRescannedStart    uint64
	InstancesRescannedHandover uint64
	// InstancesDeleted counts tier-3 instance markers deleted.
	InstancesDeleted uint64
	// WindowsDeleted and DaysDeleted count tier-2 and tier-1 rows Node-0 deleted.
	WindowsDeleted uint64
	DaysDeleted    uint64
	// Outlived counts windows and days Node-0 read back right after deleting them: rows stamped
	// within max_clock_offset of the tombstone (a late writer whose clock was ahead), which a
	// later pass deletes once the bound has passed. The checkpoint stays at them meanwhile.
	Outlived uint64
	// HeldPaused counts rows left for a later pass because the operator paused the ring or
	// their impl type: no attempt used, no marker written.
	HeldPaused uint64
	// PauseSweeps counts the traversals of a paused ring that only checked rows against their
	// markers, so that kept buckets are carried before those markers expire.
	PauseSweeps uint64
	// BreakerRefused counts executions the circuit breaker of their impl type did not let start
	// (calls it saved a downstream that was failing): the row stays, its attempt unused.
	BreakerRefused uint64
	// GuardRefusals counts operations the guard refused (no lease, expired, too short, token
	// not leased). Not being Node-0 is not counted.
	GuardRefusals uint64
	// Errors counts operations that failed for another reason (a query, a panicking executor).
	Errors uint64
}

// The live counters are a Stats whose fields are only touched through sync/atomic; snapshot and
// Sub walk the fields, so that a new counter needs no code beyond its field.

// count adds one to a field of s.stats.
func (s *Scanner) count(field *uint64) { atomic.AddUint64(field, 1) }

// snapshot reads every counter.
func snapshot(live *Stats) Stats {
	var out Stats
	src, dst := reflect.ValueOf(live).Elem(), reflect.ValueOf(&out).Elem()
	for i := 0; i < src.NumField(); i++ {
		dst.Field(i).SetUint(atomic.LoadUint64(src.Field(i).Addr().Interface().(*uint64)))
	}
	return out
}

// Sub returns the counts of s that happened after before.
func (s Stats) Sub(before Stats) Stats {
	out := s
	dst, b := reflect.ValueOf(&out).Elem(), reflect.ValueOf(before)
	for i := 0; i < dst.NumField(); i++ {
		dst.Field(i).SetUint(dst.Field(i).Uint() - b.Field(i).Uint())
	}
	return out
}
