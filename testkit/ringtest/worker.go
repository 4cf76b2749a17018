package ringtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/ringtest/faultproxy"
	"github.com/retryring/retryring/worker/leaseclient"
)

// WorkerOptions configures one worker process.
type WorkerOptions struct {
	// ID is the worker id. Required.
	ID string
	// Incarnation is the process's incarnation. Default: a random one.
	Incarnation string
	// Coordinators are the indexes of the coordinators the worker is told about. Default: all. Give a
	// follower's index alone to make the worker find the leader through a not_leader redirect.
	Coordinators []int
}

// workerState is where a worker process is in its life.
type workerState int

const (
	workerRunning workerState = iota
	workerLeaving
	workerLeft
	workerStopped
)

// Worker is one worker process: a real lease client whose every connection, to whichever
// coordinator, passes through the worker's own fault proxy.
type Worker struct {
	c *Cluster
	// ID and Incarnation name the process; Holder() is their pair as the history names it.
	ID          string
	Incarnation string

	coords []int
	proxy  *faultproxy.Proxy
	client *leaseclient.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	state  workerState
	net    faultproxy.Mode
	runErr error
}

// StartWorker starts a worker process as o describes; it joins the ring on its own.
func (c *Cluster) StartWorker(o WorkerOptions) *Worker {
	c.t.Helper()
	w, err := c.startWorker(o)
	if err != nil {
		c.t.Fatalf("ringtest: starting worker %s: %v", o.ID, err)
	}
	return w
}

func (c *Cluster) startWorker(o WorkerOptions) (*Worker, error) {
	if o.Incarnation == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		o.Incarnation = hex.EncodeToString(b[:])
	}
	if len(o.Coordinators) == 0 {
		for i := range c.coords {
			o.Coordinators = append(o.Coordinators, i)
		}
	}
	addrs := make([]string, len(o.Coordinators))
	for i, idx := range o.Coordinators {
		if idx < 0 || idx >= len(c.coords) {
			return nil, fmt.Errorf("no coordinator %d", idx)
		}
		addrs[i] = c.coords[idx].RSocketAddr()
	}
	w := &Worker{c: c, ID: o.ID, Incarnation: o.Incarnation, coords: o.Coordinators, proxy: faultproxy.New(), done: make(chan struct{})}
	client, err := leaseclient.New(leaseclient.Config{
		WorkerID: o.ID, Incarnation: o.Incarnation, Ring: c.opts.Ring, Coordinators: addrs,
		KeepaliveLifetime: c.opts.KeepaliveLifetime,
		Backoff:           leaseclient.Backoff{Min: leaseclient.DefaultBackoffMin, Max: c.opts.BackoffMax},
		Logger:            c.log,
		OnLease:           func(l lease.Lease) { c.rec.Install(w.ID, w.Incarnation, l) },
		Drain:             w.drain,
	})
	if err != nil {
		return nil, err
	}
	w.client = client
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("cluster closed")
	}
	c.workers = append(c.workers, w)
	c.byConn[w.Holder()] = w.proxy
	c.mu.Unlock()

	c.rec.Note(Event{Kind: EventWorkerStarted, Worker: w.ID, Incarnation: w.Incarnation, Fault: true})
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		err := client.Run(ctx)
		w.mu.Lock()
		w.runErr = err
		w.mu.Unlock()
	}()
	return w, nil
}

// drain is the lease client's Drain hook. The harness's worker has no data plane, so there is
// nothing to wait for; on Leave the client calls it after clearing its guard and before sending
// ring.leave, which is exactly the instant the worker stopped using everything.
func (w *Worker) drain(_ context.Context, _, next lease.Lease) error {
	w.mu.Lock()
	leaving := w.state == workerLeaving
	w.mu.Unlock()
	if leaving && next.NodeIndex == -1 && next.Ranges.Empty() {
		w.c.rec.End(w.ID, w.Incarnation)
	}
	return nil
}

// Holder is the worker's name in the history: id and incarnation.
func (w *Worker) Holder() string { return holderName(w.ID, w.Incarnation) }

// Client is the worker's lease client.
func (w *Worker) Client() *leaseclient.Client { return w.client }

// Guard is the worker's TimeWindowGuard.
func (w *Worker) Guard() *lease.Guard { return w.client.Guard() }

// Lease returns the lease the worker's guard holds, valid or not.
func (w *Worker) Lease() (lease.Lease, bool) { return w.client.Current() }

// Proxy is the worker's network.
func (w *Worker) Proxy() *faultproxy.Proxy { return w.proxy }

// Running reports whether the process still runs (not stopped, not left).
func (w *Worker) Running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == workerRunning
}

// stopped reports whether the process crashed (Stop), as opposed to leaving.
func (w *Worker) stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == workerStopped
}

// expectedActive reports whether the worker should hold a share once the ring settles.
func (w *Worker) expectedActive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state == workerRunning && w.net == faultproxy.Normal
}

// Stop crashes the process: it stops using everything now and its connections close without a
// leave (as on kill -9, the coordinator sees the connection end, unless the network is hung).
func (w *Worker) Stop() {
	w.c.t.Helper()
	w.mu.Lock()
	if w.state != workerRunning {
		w.mu.Unlock()
		return
	}
	w.state = workerStopped
	w.mu.Unlock()
	w.c.rec.Note(Event{Kind: EventWorkerStopped, Worker: w.ID, Incarnation: w.Incarnation, Fault: true})
	w.c.rec.End(w.ID, w.Incarnation)
	w.cancel()
	if !w.waitRun() {
		w.c.t.Errorf("ringtest: worker %s did not stop within %v", w.Holder(), w.c.opts.Wait)
	}
}

// Leave leaves the ring gracefully and ends the process. It returns the lease client's error.
func (w *Worker) Leave() error {
	w.c.t.Helper()
	w.mu.Lock()
	if w.state != workerRunning {
		w.mu.Unlock()
		return fmt.Errorf("worker %s is not running", w.Holder())
	}
	w.state = workerLeaving
	w.mu.Unlock()
	w.c.rec.Note(Event{Kind: EventWorkerLeaving, Worker: w.ID, Incarnation: w.Incarnation, Fault: true})
	ctx, cancel := context.WithTimeout(context.Background(), w.c.opts.Wait)
	defer cancel()
	err := w.client.Leave(ctx)
	// Drain has ended the holder if a lease was held; without one there is nothing to end.
	w.c.rec.End(w.ID, w.Incarnation)
	if _, gerr := w.client.Guard().Check(0); gerr == nil {
		w.c.t.Errorf("ringtest: worker %s's guard still grants after Leave", w.Holder())
	}
	w.cancel()
	if !w.waitRun() {
		w.c.t.Errorf("ringtest: worker %s did not stop within %v of Leave", w.Holder(), w.c.opts.Wait)
	}
	w.mu.Lock()
	w.state = workerLeft
	w.mu.Unlock()
	w.c.rec.Note(Event{Kind: EventWorkerLeft, Worker: w.ID, Incarnation: w.Incarnation, Err: err})
	return err
}

// Hang makes the worker's network silent: nothing it sends arrives, nothing arrives to it, its
// connections stay open. The process runs on; its guard stops the lease at expiry by itself.
func (w *Worker) Hang() { w.setNet(faultproxy.Hung, EventWorkerHung, w.proxy.Hang) }

// Cut cuts the worker off: its connections close and new ones are refused.
func (w *Worker) Cut() { w.setNet(faultproxy.Cut, EventWorkerCut, w.proxy.Cut) }

// Heal gives the worker its network back; it reconnects with the same incarnation.
func (w *Worker) Heal() { w.setNet(faultproxy.Normal, EventWorkerHealed, w.proxy.Heal) }

func (w *Worker) setNet(m faultproxy.Mode, kind EventKind, apply func()) {
	w.mu.Lock()
	w.net = m
	w.mu.Unlock()
	w.c.rec.Note(Event{Kind: kind, Worker: w.ID, Incarnation: w.Incarnation, Fault: true})
	apply()
}

// NewIncarnation starts another process with the same worker id and a fresh incarnation, told
// about the same coordinators. The old process is left as it is (stopped, hung or even running).
func (w *Worker) NewIncarnation() *Worker {
	w.c.t.Helper()
	return w.c.StartWorker(WorkerOptions{ID: w.ID, Coordinators: w.coords})
}

// RunErr is what the lease client's Run returned, once it has.
func (w *Worker) RunErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runErr
}

// waitRun waits, bounded, for Run to return.
func (w *Worker) waitRun() bool {
	return waitClosed(w.done, w.c.opts.Wait)
}

// shutdown ends the process for Cluster.Close: a crash, without notes.
func (w *Worker) shutdown() {
	w.mu.Lock()
	if w.state == workerRunning {
		w.state = workerStopped
	}
	w.mu.Unlock()
	w.c.rec.End(w.ID, w.Incarnation)
	w.cancel()
	if !w.waitRun() {
		w.c.t.Errorf("ringtest: worker %s did not stop within %v", w.Holder(), w.c.opts.Wait)
	}
}
