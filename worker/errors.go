package worker

import "errors"

// Errors of the worker. Guard refusals are not wrapped in these: they keep the lease package's
// sentinels (lease.ErrLeaseExpired, lease.ErrTokenNotLeased, ...), which lease.IsGuardError tells
// apart from failures.
var (
	// ErrInvalidConfig means a Config failed Validate.
	ErrInvalidConfig = errors.New("worker: invalid configuration")
	// ErrStopped means the worker was asked to stop (its context ended) before the operation
	// could start; the bucket or instance at hand is kept for a later pass.
	ErrStopped = errors.New("worker: stopped")
)
