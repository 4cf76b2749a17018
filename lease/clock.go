package lease

import (
	"time"

	"github.com/retryring/retryring/wallclock"
)

// Clock tells the time. Workers use a monotonic clock (time.Now carries a monotonic reading in Go),
// tests inject a manual one.
type Clock interface {
	Now() time.Time
}

// SystemClock is the process clock, with Go's monotonic reading.
type SystemClock struct{}

// Now returns wallclock.Now(): the host clock, which only a test build (the skewclock tag) runs
// off by a skew. Every default clock of the process reads it, so that lease validity, windows
// and write timestamps agree on one clock.
func (SystemClock) Now() time.Time { return wallclock.Now() }
