package benchkit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

// Ring is the ring every benchmark writes and drains.
var Ring = lease.RingKey{Region: "bench", Cluster: "c1", Service: "orders"}

// StaticGuards splits the ring among n workers with lease.Split and gives worker i a guard on
// the system clock holding range i (worker 0 is Node-0) for ttl: the leases a settled
// coordinator would hand out, without a coordinator.
func StaticGuards(n int, ttl time.Duration) []*lease.Guard {
	now := time.Now()
	out := make([]*lease.Guard, n)
	for i, rg := range lease.Split(n) {
		g := lease.NewGuard(lease.SystemClock{}, 100*time.Millisecond)
		g.Set(lease.Lease{
			WorkerID: WorkerID(i), Ring: Ring, NodeIndex: i, NodeCount: n, Epoch: 1,
			Ranges: lease.Ranges{rg}, TTL: ttl, ValidFrom: now,
		})
		out[i] = g
	}
	return out
}

// WorkerID names worker i.
func WorkerID(i int) string { return fmt.Sprintf("bench-worker-%d", i) }

// NoopExecutor answers Done at once and counts its calls.
type NoopExecutor struct{ Calls atomic.Int64 }

// Execute implements worker.Executor.
func (e *NoopExecutor) Execute(context.Context, worker.Task) worker.Outcome {
	e.Calls.Add(1)
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

// NewScanners builds one worker per guard on store, with the wall clock, a no-op-friendly
// configuration (the executor returns at once) and the given concurrency.
func NewScanners(store *cassandra.Store, guards []*lease.Guard, exec worker.Executor, concurrency int) ([]*worker.Scanner, error) {
	out := make([]*worker.Scanner, len(guards))
	for i, g := range guards {
		sc, err := worker.New(worker.Config{
			Region: Ring.Region, Cluster: Ring.Cluster, Service: Ring.Service, WorkerID: WorkerID(i),
			WindowMinutes: store.WindowMinutes(), Concurrency: concurrency,
			// A busy shared machine can take seconds for one statement; nothing here expires.
			QueryTimeout: 10 * time.Second, ExecTimeout: 10 * time.Second,
		}, store, g, exec)
		if err != nil {
			return nil, err
		}
		out[i] = sc
	}
	return out, nil
}

// DrainResult says what DrainAll did.
type DrainResult struct {
	Cycles  int // rounds of concurrent cycles
	Elapsed time.Duration
	Errors  []error // cycle errors (the drain goes on after them)
}

// DrainAll runs a cycle of every scanner at once, again and again, until a round in which none
// made progress, or maxRounds.
func DrainAll(ctx context.Context, scanners []*worker.Scanner, maxRounds int) DrainResult {
	start := time.Now()
	var res DrainResult
	for res.Cycles < maxRounds && ctx.Err() == nil {
		res.Cycles++
		var wg sync.WaitGroup
		var mu sync.Mutex
		moved := false
		for _, sc := range scanners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := sc.Cycle(ctx)
				mu.Lock()
				defer mu.Unlock()
				moved = moved || r.Progress()
				if err != nil {
					res.Errors = append(res.Errors, err)
				}
			}()
		}
		wg.Wait()
		if !moved {
			break
		}
	}
	res.Elapsed = time.Since(start)
	return res
}

// History is a backdated history of failures: consecutive one-minute windows, each written by
// the same Instances instances with RowsPerInstance failures each, through the recorder's late
// protocol (a --backdate import), one window after the other.
type History struct {
	Store           *cassandra.Store
	First           window.Window // the first window of the history; later ones follow it
	Instances       int
	RowsPerInstance int

	rec  *recorder.Recorder
	next int // windows written so far
}

// PerWindow is the number of failures in a window.
func (h *History) PerWindow() int { return h.Instances * h.RowsPerInstance }

// Write records the next n windows and returns the number of failures written and the windows.
func (h *History) Write(ctx context.Context, n int) (int, []window.Window, error) {
	if h.rec == nil {
		// Unchecked: a benchmark on one host, whose workers share this process's clock.
		rec, err := recorder.New(h.Store, recorder.Config{InstanceID: "bench-importer", UncheckedClock: true})
		if err != nil {
			return 0, nil, err
		}
		h.rec = rec
	}
	written := 0
	var ws []window.Window
	for range n {
		w := h.First.Add(h.next)
		h.next++
		fs := make([]recorder.Failure, 0, h.PerWindow())
		for in := range h.Instances {
			for r := range h.RowsPerInstance {
				fs = append(fs, recorder.Failure{
					TransactionID: fmt.Sprintf("tx-%s-%03d-%05d", w, in, r),
					InstanceID:    fmt.Sprintf("pod-%03d", in),
					ImplType:      "Payment", AllocationKey: "k",
				})
			}
		}
		if err := h.rec.RecordAt(ctx, w, fs...); err != nil {
			return written, ws, fmt.Errorf("record into %s: %w", w, err)
		}
		written += len(fs)
		ws = append(ws, w)
	}
	return written, ws, nil
}

// PastWindow is the one-minute window that started ago before now.
func PastWindow(ago time.Duration) window.Window {
	w, err := window.Of(time.Now().Add(-ago), 1)
	if err != nil {
		panic(err) // 1 divides 1440
	}
	return w
}
