package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/recorder"
)

// load records failures steadily, as services do: rate per second, each into the window after
// the current one (recorder.Record), instance ids taken in turn from a pool of instances, so that
// the rows of every window are spread over the whole ring by their instances' tokens.
type load struct {
	rec       *recorder.Recorder
	rate      float64
	instances int
	prefix    string

	mu      sync.Mutex
	ids     []string // recorded, in order
	errs    int
	lastErr error
}

// run records until ctx ends, catching up after a slow write so that the rate holds on average.
func (l *load) run(ctx context.Context) {
	start := time.Now()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	n := 0
	for {
		due := int(l.rate * time.Since(start).Seconds())
		for ; n < due && ctx.Err() == nil; n++ {
			id := fmt.Sprintf("%s%d", l.prefix, n)
			_, err := l.rec.Record(ctx, recorder.Failure{
				TransactionID: id, InstanceID: fmt.Sprintf("%sinst-%d", l.prefix, n%l.instances),
				ImplType: "PaymentStep", AllocationKey: "k",
			})
			if ctx.Err() != nil {
				return // the write the stop cut short: not recorded, not a failure
			}
			l.mu.Lock()
			if err != nil {
				l.errs++
				l.lastErr = err
			} else {
				l.ids = append(l.ids, id)
			}
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recorded returns the ids recorded so far and the failed writes.
func (l *load) recorded() (ids []string, errs int, lastErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...), l.errs, l.lastErr
}
