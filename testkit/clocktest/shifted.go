package clocktest

import (
	"sync"
	"time"
)

// Shifted is the wall clock moved by an offset the test sets: a process whose clock is off by
// that much (a negative offset lags), or, once advanced, the wall clock as it will read later.
// Tests of Cassandra write timestamps need it: the driver stamps writes with the wall clock, so
// a clock that stamps deletes or skewed writes must move with it. Safe for concurrent use.
type Shifted struct {
	mu sync.Mutex
	by time.Duration
}

// NewShifted returns the wall clock moved by by.
func NewShifted(by time.Duration) *Shifted { return &Shifted{by: by} }

// Now reads the wall clock and moves the reading.
func (c *Shifted) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.by)
}

// Advance moves the clock d further ahead of the wall clock.
func (c *Shifted) Advance(d time.Duration) {
	c.mu.Lock()
	c.by += d
	c.mu.Unlock()
}
