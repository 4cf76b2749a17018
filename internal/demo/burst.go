package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// Bounds of the recording.
const (
	// importBatch is the number of failures one late-protocol write publishes (--backdate).
	importBatch = 1000
	// recordAttempts bounds the tries of one failure: a write that misses its window's start is
	// given up and retried into a later window, as a regular service would.
	recordAttempts = 3
)

// burst is the failures the demo records, as cfg.Instances regular-service instances would: live,
// each into W+1 as it happens, or backdated (--backdate), in batches into a past window through the
// late-write protocol. It keeps which transaction went into which window: the ledger's "recorded".
type burst struct {
	cfg   Config
	store *cassandra.Store
	event func(format string, args ...any)

	mu  sync.Mutex
	own map[window.Window][]string
	// took is how long recording took; set before record returns.
	took time.Duration
}

func newBurst(cfg Config, store *cassandra.Store, event func(format string, args ...any)) *burst {
	return &burst{cfg: cfg, store: store, event: event, own: map[window.Window][]string{}}
}

// record records the whole burst.
func (b *burst) record(ctx context.Context) error {
	started := b.cfg.Now()
	defer func() { b.took = b.cfg.Now().Sub(started) }()
	// Unchecked: the demo runs every process on this host, on one clock, beside its own Cassandra.
	recs := make([]*recorder.Recorder, b.cfg.Instances)
	for i := range recs {
		var err error
		if recs[i], err = recorder.New(b.store, recorder.Config{InstanceID: fmt.Sprintf("%s-pod-%d", b.cfg.Ring.Service, i), UncheckedClock: true}); err != nil {
			return err
		}
	}
	prefix := fmt.Sprintf("%s-%s-", b.cfg.Ring.Service, started.UTC().Format("150405"))
	if b.cfg.Backdate > 0 {
		return b.backdated(ctx, recs, prefix, started)
	}
	return b.live(ctx, recs, prefix)
}

// failure is the i-th failure of the burst.
func failure(prefix string, i int) recorder.Failure {
	return recorder.Failure{TransactionID: fmt.Sprintf("%s%06d", prefix, i), ImplType: "PaymentStep", AllocationKey: fmt.Sprint(i % 97)}
}

// note keeps that ids went into w.
func (b *burst) note(w window.Window, ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.own[w] = append(b.own[w], ids...)
}

// backdated writes the burst in batches of importBatch into the window after the one the clock
// showed Backdate ago, each batch from the next instance in turn.
func (b *burst) backdated(ctx context.Context, recs []*recorder.Recorder, prefix string, started time.Time) error {
	target, err := window.Of(started.Add(-b.cfg.Backdate), b.cfg.WindowMinutes)
	if err != nil {
		return err
	}
	target = target.Next()
	for i, k := 0, 0; i < b.cfg.Count; k++ {
		n := min(importBatch, b.cfg.Count-i)
		fs := make([]recorder.Failure, n)
		ids := make([]string, n)
		for j := range fs {
			fs[j] = failure(prefix, i+j)
			ids[j] = fs[j].TransactionID
		}
		if err := recs[k%len(recs)].RecordAt(ctx, target, fs...); err != nil {
			return fmt.Errorf("demo: record %d failures into %v: %w", n, target, err)
		}
		b.note(target, ids...)
		i += n
	}
	return nil
}

// live records every failure on its own through the W+1 path, RecordConcurrency at a time, each
// tried up to recordAttempts times.
func (b *burst) live(ctx context.Context, recs []*recorder.Recorder, prefix string) error {
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range b.cfg.RecordConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.cfg.Count || ctx.Err() != nil {
					return
				}
				f := failure(prefix, i)
				var err error
				for range recordAttempts {
					var key cassandra.BucketKey
					if key, err = recs[i%len(recs)].Record(ctx, f); err == nil {
						b.note(key.Window, f.TransactionID)
						break
					}
				}
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if n := failed.Load(); n > 0 {
		// A regular service would report these to its caller; they were never recorded, so
		// they are not the retry system's to lose.
		b.event("%d failures could not be recorded (first error: %v); they are left out of the count", n, firstErr)
	}
	return nil
}

// written counts the failures recorded so far.
func (b *burst) written() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, ids := range b.own {
		n += len(ids)
	}
	return n
}

// recorded returns, per window, the transactions recorded into it so far.
func (b *burst) recorded() map[window.Window][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	own := make(map[window.Window][]string, len(b.own))
	for w, ids := range b.own {
		own[w] = ids // appended to only under b.mu; the slice header copy is a snapshot
	}
	return own
}

// drainStart is when the first window of the burst opens to the workers.
func (b *burst) drainStart(now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := time.Time{}
	for w := range b.own {
		if o := w.Start().Add(b.cfg.MaxClockOffset); first.IsZero() || o.Before(first) {
			first = o
		}
	}
	if first.IsZero() || first.Before(now) && b.cfg.Backdate > 0 {
		return now // late writes are readable at once
	}
	return first
}

// windows names the windows the burst went into, with their counts.
func (b *burst) windows() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ws := make([]window.Window, 0, len(b.own))
	for w := range b.own {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Compare(ws[j]) < 0 })
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("window %s (%s)", w.Start().UTC().Format("15:04"), num(len(b.own[w])))
	}
	return strings.Join(parts, " and ")
}
