package flood

import (
	"sync"
	"time"
)

// Cover watches whether each of a few workers holds a usable lease, every period, and keeps the
// longest stretch each went without one after it first had one. A stretch is measured from the
// first sample that finds no lease to the first that finds one again: it may be a period longer
// than it was, and one shorter than a period may go unseen.
type Cover struct {
	holds  []func() bool
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	since  []time.Time // start of the current lapse; zero while held
	seen   []bool      // held once
	length []time.Duration
	lapses []int
}

// WatchCover starts sampling holds (one function per worker) every period until Stop.
func WatchCover(period time.Duration, holds ...func() bool) *Cover {
	c := &Cover{holds: holds, stop: make(chan struct{}), done: make(chan struct{}),
		since: make([]time.Time, len(holds)), seen: make([]bool, len(holds)),
		length: make([]time.Duration, len(holds)), lapses: make([]int, len(holds))}
	go func() {
		defer close(c.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case now := <-t.C:
				c.sample(now)
			}
		}
	}()
	return c
}

func (c *Cover) sample(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.holds {
		held := h()
		switch {
		case held:
			if !c.since[i].IsZero() {
				c.length[i] = max(c.length[i], now.Sub(c.since[i]))
				c.since[i] = time.Time{}
			}
			c.seen[i] = true
		case c.seen[i] && c.since[i].IsZero():
			c.since[i] = now
			c.lapses[i]++
		}
	}
}

// Stop ends the watch and returns, per worker, the longest lapse (one still open counts up to
// now) and the number of lapses.
func (c *Cover) Stop() (longest []time.Duration, lapses []int) {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for i := range c.holds {
		if !c.since[i].IsZero() {
			c.length[i] = max(c.length[i], now.Sub(c.since[i]))
		}
	}
	return append([]time.Duration(nil), c.length...), append([]int(nil), c.lapses...)
}
