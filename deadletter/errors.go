package deadletter

import "errors"

var (
	// ErrFilter means a filter was refused (no time bound, an empty or too long range).
	ErrFilter = errors.New("deadletter: invalid filter")
	// ErrReplayID means a replay run id is empty or longer than 128 bytes.
	ErrReplayID = errors.New("deadletter: invalid replay id")
	// ErrRate means a replay rate is negative.
	ErrRate = errors.New("deadletter: invalid replay rate")
	// ErrTries means a replay's tries per statement is negative.
	ErrTries = errors.New("deadletter: invalid tries per statement")
	// ErrStopped means a replay stopped on a statement that failed for good, or transiently
	// more often than its tries allow; running the same id again completes it.
	ErrStopped = errors.New("deadletter: replay stopped")
)
