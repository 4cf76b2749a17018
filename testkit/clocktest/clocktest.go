package clocktest

import (
	"sync"
	"time"
)

// Start is where a clock of a test that does not care about the date begins.
var Start = time.Unix(1_700_000_000, 0)

// Manual is a clock that moves only when told to; safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads at until it is moved.
func New(at time.Time) *Manual { return &Manual{now: at} }

// Now reads the clock.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards too (a stepped wall clock).
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
