package lease

import "time"

// Clock tells the time. Workers use a monotonic clock (time.Now carries a monotonic reading in Go),
// tests inject a manual one.
type Clock interface {
	Now() time.Time
}

// SystemClock is the process clock, with Go's monotonic reading.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
