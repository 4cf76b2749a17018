package demo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
)

// portAttempts is how often a launch that lost a port race (another process took a port
// between proc.FreeAddr and the child's listen) is tried again on fresh ports.
const portAttempts = 3

// pollEvery is the period of the readiness polls.
const pollEvery = 100 * time.Millisecond

// fleet is the demo's processes: coordinators and workers of one ring, all running the demo's
// binary, with their logs in one directory.
type fleet struct {
	cfg Config
	dir string
	ds  *downstream.Server

	mu      sync.Mutex
	coords  []*proc.Coordinator
	workers []*proc.Worker
}

func newFleet(cfg Config, dir string, ds *downstream.Server) *fleet {
	return &fleet{cfg: cfg, dir: dir, ds: ds}
}

func (f *fleet) coordinators() []*proc.Coordinator {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*proc.Coordinator(nil), f.coords...)
}

func (f *fleet) workerList() []*proc.Worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*proc.Worker(nil), f.workers...)
}

func (f *fleet) launch(name string, args []string) (*proc.Process, error) {
	return proc.Launch(proc.Spec{Name: name, Path: f.cfg.Binary, Args: args, LogDir: f.dir})
}

// startCoordinators launches every coordinator with one --peers list and waits until a leader
// is known and every node is ready, on fresh ports again if a port was taken.
func (f *fleet) startCoordinators(ctx context.Context) error {
	var err error
	for range portAttempts {
		if err = f.launchCoordinators(ctx); !errors.Is(err, proc.ErrPortInUse) {
			return err
		}
		for _, co := range f.coordinators() {
			if co.Process != nil {
				_ = co.Kill9()
			}
		}
	}
	return err
}

func (f *fleet) launchCoordinators(ctx context.Context) error {
	cos := make([]*proc.Coordinator, f.cfg.Coordinators)
	peers := make([]string, len(cos))
	for i := range cos {
		co := &proc.Coordinator{ID: "c" + strconv.Itoa(i+1)}
		for _, addr := range []*string{&co.RaftAddr, &co.RSocketAddr, &co.HTTPAddr} {
			a, err := proc.FreeAddr()
			if err != nil {
				return err
			}
			*addr = a
		}
		// A fresh directory per attempt: a node must not find the Raft state of another
		// configuration.
		co.DataDir = filepath.Join(f.dir, "data", fmt.Sprintf("%s-%d", co.ID, f.cfg.Now().UnixNano()))
		cos[i] = co
		peers[i] = co.ID + "=" + co.RaftAddr
	}
	f.mu.Lock()
	f.coords = cos
	f.mu.Unlock()
	for _, co := range cos {
		p, err := f.launch(co.ID, append(co.Args(peers), f.cfg.CoordinatorArgs...))
		if err != nil {
			return err
		}
		co.Process = p
	}
	return proc.WaitStarted(ctx, cos, func(ctx context.Context) error {
		_, err := f.waitLeader(ctx)
		return err
	})
}

// workerArgs is a worker's command line.
func (f *fleet) workerArgs(id, httpAddr string) []string {
	var rsocket []string
	for _, co := range f.coordinators() {
		rsocket = append(rsocket, co.RSocketAddr)
	}
	r := f.cfg.Ring
	args := []string{
		"worker", "--worker-id", id, "--coordinators", strings.Join(rsocket, ","),
		"--cassandra", f.cfg.Cassandra, "--keyspace", f.cfg.Keyspace,
		"--region", r.Region, "--cluster", r.Cluster, "--service", r.Service,
		"--window-minutes", strconv.Itoa(f.cfg.WindowMinutes),
		"--executor-url", f.ds.URL(), "--concurrency", strconv.Itoa(f.cfg.WorkerConcurrency),
		"--max-clock-offset", f.cfg.MaxClockOffset.String(),
		"--http-addr", httpAddr,
	}
	return append(args, f.cfg.WorkerArgs...)
}

// startWorkers launches w1..wN and waits until each answers /healthz.
func (f *fleet) startWorkers(ctx context.Context) error {
	for i := range f.cfg.Workers {
		id := "w" + strconv.Itoa(i+1)
		addr, err := proc.FreeAddr()
		if err != nil {
			return err
		}
		p, err := f.launch(id, f.workerArgs(id, addr))
		if err != nil {
			return err
		}
		w := &proc.Worker{Process: p, ID: id, HTTPAddr: addr}
		f.mu.Lock()
		f.workers = append(f.workers, w)
		f.mu.Unlock()
	}
	for _, w := range f.workerList() {
		if err := f.waitWorker(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// waitWorker waits for /healthz, launching again on a fresh port when the port was taken.
func (f *fleet) waitWorker(ctx context.Context, w *proc.Worker) error {
	for attempt := 1; ; attempt++ {
		err := w.WaitHealthy(ctx)
		if !errors.Is(err, proc.ErrPortInUse) || attempt == portAttempts {
			return err
		}
		addr, aerr := proc.FreeAddr()
		if aerr != nil {
			return aerr
		}
		w.HTTPAddr = addr
		w.SetArgs(f.workerArgs(w.ID, addr))
		if err := w.Restart(); err != nil {
			return err
		}
	}
}

// leader asks every running coordinator for its view and returns the one that reports itself
// as leader (the highest term if two do, as a deposed leader may for a moment).
func (f *fleet) leader(ctx context.Context) (*proc.Coordinator, coordinator.RingView, error) {
	var best *proc.Coordinator
	var bestView coordinator.RingView
	for _, co := range f.coordinators() {
		if co.Process == nil || !co.Running() {
			continue
		}
		v, err := co.View(ctx)
		if err != nil {
			continue
		}
		if v.LeaderID == co.ID && v.CoordinatorID == co.ID && (best == nil || v.RaftTerm > bestView.RaftTerm) {
			best, bestView = co, v
		}
	}
	if best == nil {
		return nil, coordinator.RingView{}, proc.ErrNoLeader
	}
	return best, bestView, nil
}

func (f *fleet) waitLeader(ctx context.Context) (*proc.Coordinator, error) {
	return poll(ctx, func() (*proc.Coordinator, bool) {
		co, _, err := f.leader(ctx)
		return co, err == nil
	})
}

// waitSettled waits until the leader's view shows every running worker as an active member and
// the members' ranges cover the ring.
func (f *fleet) waitSettled(ctx context.Context) (coordinator.RingView, error) {
	return poll(ctx, func() (coordinator.RingView, bool) {
		_, v, err := f.leader(ctx)
		if err != nil {
			return v, false
		}
		running := map[string]bool{}
		for _, w := range f.workerList() {
			if w.Running() {
				running[w.ID] = true
			}
		}
		return v, settled(ringOf(v, f.cfg.Ring), running)
	})
}

// settled reports whether exactly the running workers are active members whose ranges cover
// the whole ring.
func settled(r coordinator.RingStateView, running map[string]bool) bool {
	var covered lease.Ranges
	active := 0
	for _, m := range r.Members {
		if m.State != coordinator.MemberActive {
			return false
		}
		if !running[m.WorkerID] {
			return false
		}
		rs, err := lease.DecodeRanges(m.Ranges)
		if err != nil || covered.Overlaps(rs) {
			return false
		}
		covered = covered.Union(rs)
		active++
	}
	return active == len(running) && covered.Equal(lease.Ranges{lease.FullRing})
}

// ringOf finds ring in a view; the zero view when it is not there yet.
func ringOf(v coordinator.RingView, ring lease.RingKey) coordinator.RingStateView {
	r, _ := v.Ring(ring)
	return r
}

// stop ends every process gracefully, workers first (they leave the ring through the
// coordinators), each bounded by wait and killed after it.
func (f *fleet) stop(wait time.Duration) {
	termAll := func(ps []*proc.Process) {
		var wg sync.WaitGroup
		for _, p := range ps {
			if p == nil || !p.Running() {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = p.Term(wait)
			}()
		}
		wg.Wait()
	}
	var ws, cs []*proc.Process
	for _, w := range f.workerList() {
		ws = append(ws, w.Process)
	}
	for _, co := range f.coordinators() {
		cs = append(cs, co.Process)
	}
	termAll(ws)
	termAll(cs)
}

// kill ends every process at once (SIGKILL), for a second Ctrl-C.
func (f *fleet) kill() {
	for _, w := range f.workerList() {
		_ = w.Kill9()
	}
	for _, co := range f.coordinators() {
		if co.Process != nil {
			_ = co.Kill9()
		}
	}
}

// poll calls try every pollEvery until it succeeds or ctx ends.
func poll[T any](ctx context.Context, try func() (T, bool)) (T, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		v, ok := try()
		if ok {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-t.C:
		}
	}
}
