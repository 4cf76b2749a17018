package worker

import (
	"context"
	"time"

	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// Task is one retry to execute: the Tier 5 metadata of a failed saga step plus where it was found
// and who runs it. It never carries a payload: an Executor fetches that by TransactionID.
type Task struct {
	TransactionID string
	ServiceName   string
	Region        string
	Cluster       string
	InstanceID    string // the regular node that recorded the failure
	AllocationKey string
	ImplType      string // stacksaga_impl_type: names the step, and is the marker's span_key
	// Attempt is the row's attempt column: 0 for a first failure, +1 per re-recording. This
	// execution is retry number Attempt+1.
	Attempt int
	// Replay is the row's replay generation: 0 until an operator replays the step's dead letter.
	// With ImplType and TransactionID it names the idempotency key of the step.
	Replay     int
	AddedAt    time.Time
	Window     window.Window // the window the row was found in
	WorkerID   string
	LeaseEpoch uint64 // the epoch of the lease the guard checked just before the execution
}

// OutcomeKind is what an execution makes of a step: retrypolicy.OutcomeKind, the one kind the
// retry policy classifies a status into and an Executor reports. The worker names it, and its
// values below, so that an Executor needs no other package to report an outcome.
type OutcomeKind = retrypolicy.OutcomeKind

// Outcome kinds (see retrypolicy.OutcomeKind). The zero value is not an outcome: an Executor must
// pick one.
const (
	// Done: the step succeeded (or had already succeeded). Its marker becomes COMMITTED.
	Done = retrypolicy.Done
	// Transient: the step may succeed later. It is recorded again into a later window.
	Transient = retrypolicy.Transient
	// Permanent: the step will never succeed. It is dead-lettered at once.
	Permanent = retrypolicy.Permanent
	// NotSent: the call never reached the downstream (the executor refused to send it past its
	// deadline). It is no outcome: no attempt is used, the row stays for a later pass.
	NotSent = retrypolicy.NotSent
)

// Outcome is what an Executor reports about one execution.
type Outcome struct {
	Kind OutcomeKind
	// Status is the downstream status (an HTTP status for the HTTP executor), 0 when there was
	// none (timeout, refused connection).
	Status int
	// Err says what went wrong, for Transient and Permanent; it is kept in the dead letter.
	Err error
	// RetryAfter, for Transient, is how long after its answer the downstream asked not to be
	// called again (the HTTP executor: a 429 or 503 with a valid Retry-After); 0 when it did not
	// ask. Uncapped: the step's retry policy caps it (retrypolicy.Policy.WithRetryAfter).
	RetryAfter time.Duration
}

// Executor runs one retry. It must return within ctx's deadline (the worker's execution
// timeout) and must be safe for concurrent use. A step may be executed more than once (a worker
// crashed between the call and its COMMITTED marker), so executors pass Task.TransactionID on as an
// idempotency key.
//
// ctx's deadline ends before the lease the execution runs under does. An executor must not start
// its side effect once ctx is done, and should look as late as it can: a worker paused after its
// guard's check (a GC pause, a SIGSTOP) may resume after its lease ended. The stock HTTP executor
// checks as the request's first byte is written (executor.ErrFenced).
type Executor interface {
	Execute(ctx context.Context, t Task) Outcome
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, t Task) Outcome

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, t Task) Outcome { return f(ctx, t) }
