package recorder

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/window"
)

// dirKey names one directory row the recorder may write: level 1 (day), 2 (window), 3
// (instance marker) or 4 (bucket); the fields a level does not use stay zero.
type dirKey struct {
	level    uint8
	day      window.Date
	minute   int
	instance string
	bucket   int
}

// flight is one directory write in progress; concurrent writers of the same key wait on it.
type flight struct {
	done chan struct{}
	err  error
}

// dirCache remembers the directory rows this process has written and dedups concurrent first
// writes. An entry is kept until its expiry: the instant after which the normal protocol never
// writes that row again (the window's start, or the day's end), so forgetting it then costs
// nothing. It is bounded: past max entries arbitrary entries are dropped, which
// only costs a redundant (idempotent) write later.
type dirCache struct {
	mu       sync.Mutex
	written  map[dirKey]time.Time // key -> expiry
	inflight map[dirKey]*flight
	max      int
}

func newDirCache(max int) *dirCache {
	return &dirCache{written: map[dirKey]time.Time{}, inflight: map[dirKey]*flight{}, max: max}
}

// ensure makes sure the row of key has been written by this process: at once if it is cached,
// by waiting when another goroutine is writing it, else by calling write. A failed write leaves
// the key uncached (the next Record writes it again) and is returned to everyone who waited.
func (c *dirCache) ensure(ctx context.Context, key dirKey, expiry time.Time, write func(context.Context) error) error {
	c.mu.Lock()
	if _, ok := c.written[key]; ok {
		c.mu.Unlock()
		return nil
	}
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil {
				return fmt.Errorf("directory write shared with a concurrent Record: %w", f.err)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	err := write(ctx)

	c.mu.Lock()
	delete(c.inflight, key)
	if err == nil {
		c.written[key] = expiry
		if len(c.written) > c.max {
			c.dropLocked(len(c.written) - c.max)
		}
	}
	f.err = err
	close(f.done)
	c.mu.Unlock()
	return err
}

// sweep forgets every entry whose expiry has come.
func (c *dirCache) sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, exp := range c.written {
		if !now.Before(exp) {
			delete(c.written, k)
		}
	}
}

func (c *dirCache) dropLocked(n int) {
	for k := range c.written {
		if n == 0 {
			return
		}
		delete(c.written, k)
		n--
	}
}

func (c *dirCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written)
}
