package worker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// emptyDirectory is a directory with nothing in it whose reads fail while down is set, as
// every LOCAL_QUORUM read does while a quorum of replicas is down.
type emptyDirectory struct {
	noStore
	mu   sync.Mutex
	down error
}

func (d *emptyDirectory) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down
}

func (d *emptyDirectory) DayCheckpoint(context.Context, int) (cassandra.DayCheckpoint, error) {
	return cassandra.DayCheckpoint{}, d.err()
}

func (d *emptyDirectory) ListDays(context.Context, int, window.Date) ([]window.Date, error) {
	return nil, d.err()
}

func (d *emptyDirectory) WindowCheckpoint(context.Context, window.Date) (cassandra.WindowCheckpoint, error) {
	return cassandra.WindowCheckpoint{}, d.err()
}

func (d *emptyDirectory) ListWindows(context.Context, window.Date, int) ([]window.Window, error) {
	return nil, d.err()
}

// TestRunTellsHowEachCycleEnded: Config.CycleEnded hears the error of every failed cycle and nil
// for one that ran to its end, and nothing while the guard refuses (no lease).
func TestRunTellsHowEachCycleEnded(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	down := errors.New("Cannot achieve consistency level LOCAL_QUORUM")
	store := &emptyDirectory{down: down}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ended []error
	cfg := Config{Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "w1", Clock: clock, IdleBackoff: time.Millisecond}
	cfg.CycleEnded = func(err error) {
		ended = append(ended, err)
		switch len(ended) {
		case 2:
			store.mu.Lock()
			store.down = nil
			store.mu.Unlock()
		case 3:
			cancel()
		}
	}
	sc, err := New(cfg, store, g, ExecutorFunc(func(context.Context, Task) Outcome {
		t.Error("executed with an empty directory")
		return Outcome{Kind: NotSent}
	}))
	if err != nil {
		t.Fatal(err)
	}
	// No lease at first: the guard stops the cycles, and they are not told.
	if ok := sc.cycleOnce(ctx); ok || len(ended) != 0 {
		t.Fatalf("a cycle the guard stopped was told: %v", ended)
	}
	g.Set(lease.Lease{Epoch: 1, NodeIndex: 1, NodeCount: 2, TTL: time.Hour, Renewal: time.Minute, ValidFrom: clock.Now(),
		Ranges: lease.Ranges{lease.FullRing}})
	if err := sc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ended) != 3 || !errors.Is(ended[0], down) || !errors.Is(ended[1], down) || ended[2] != nil {
		t.Fatalf("cycles ended with %v; want the injected failure twice, then nil", ended)
	}
}
