package worker

import (
	"context"
	"sync"

	"github.com/retryring/retryring/lease"
)

// inflight tracks the operations under way, each with the tokens it may touch, so that Drain can
// tell the lease client when nothing uses a dropped token any more. An operation registers before
// its guard check: either the check ran before the guard switched leases (and Drain sees the
// registration and waits), or it runs after and is refused.
type inflight struct {
	mu      sync.Mutex
	nextID  uint64
	ops     map[uint64]opScope
	changed chan struct{} // closed and replaced whenever an operation ends
}

// opScope is what an operation may touch: a token range, and whether it is Node-0's.
type opScope struct {
	tokens lease.Ranges
	node0  bool
}

func newInflight() *inflight {
	return &inflight{ops: map[uint64]opScope{}, changed: make(chan struct{})}
}

// begin registers an operation and returns the function that ends it.
func (f *inflight) begin(s opScope) (end func()) {
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.ops[id] = s
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.ops, id)
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
		})
	}
}

// wait returns once no operation touches dropped (or, with node0, is Node-0's), or when ctx ends.
func (f *inflight) wait(ctx context.Context, dropped lease.Ranges, node0 bool) error {
	for {
		f.mu.Lock()
		busy := false
		for _, s := range f.ops {
			if (node0 && s.node0) || s.tokens.Overlaps(dropped) {
				busy = true
				break
			}
		}
		ch := f.changed
		f.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// tokenScope is the scope of an operation on one instance.
func tokenScope(token int64) opScope {
	return opScope{tokens: lease.Ranges{{Start: token, End: token}}}
}
