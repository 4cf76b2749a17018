package wallclock

import "errors"

var (
	// ErrSkew is a RETRYRING_TEST_CLOCK_SKEW that a skewclock build cannot use: not a Go
	// duration, or a day or more.
	ErrSkew = errors.New("wallclock: unusable clock skew")
)
