package deadletter

import "errors"

var (
	// ErrFilter means a filter was refused (no time bound, an empty or too long range).
	ErrFilter = errors.New("deadletter: invalid filter")
	// ErrReplayID means a replay run id is empty or longer than 128 bytes.
	ErrReplayID = errors.New("deadletter: invalid replay id")
	// ErrRate means a replay rate is negative.
	ErrRate = errors.New("deadletter: invalid replay rate")
)
