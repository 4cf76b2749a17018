package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
)

// The counters read from the processes.
const (
	tokensMoved    = "retryring_coordinator_ring_tokens_moved_total"
	scanned        = "retryring_worker_instances_scanned_total"
	rescanStart    = `retryring_worker_instances_rescanned_total{after="start"}`
	rescanHandover = `retryring_worker_instances_rescanned_total{after="handover"}`
	executions     = "retryring_worker_executions_total"
	guardRefusals  = "retryring_worker_guard_refusals_total"
)

// workerCounters are the worker series summed over every launch.
var workerCounters = []string{scanned, rescanStart, rescanHandover, executions, guardRefusals}

// counts is what the processes had counted at one instant, cumulative since the cluster started.
type counts struct {
	at     time.Time
	moved  float64 // tokens moved, summed over the coordinators
	epochs int     // new lease epochs seen in the leader's view
	ranges int     // changes of a worker id's ranges seen in the leader's view
	// idMoved is the share of the ring that went to another worker id (leader's view): what a
	// worker id gained, counted when it gains it.
	idMoved float64
	worker  map[string]float64 // workerCounters, summed over every launch of every worker
}

// sub is what was counted between before and c.
func (c counts) sub(before counts) counts {
	out := counts{at: c.at, moved: c.moved - before.moved, epochs: c.epochs - before.epochs,
		ranges: c.ranges - before.ranges, idMoved: c.idMoved - before.idMoved, worker: map[string]float64{}}
	for k, v := range c.worker {
		out.worker[k] = v - before.worker[k]
	}
	return out
}

// watcher follows a cluster: the leader's view (new epochs, range changes per worker id) and
// every worker's counters, every period, and the coordinators' counters on demand.
type watcher struct {
	c *proc.Cluster

	mu       sync.Mutex
	members  map[string]memberSeen // worker id → what the leader last showed of it
	viewed   bool                  // a view was read: ids seen later joined
	epochs   int
	ranges   int
	idMoved  float64
	launches map[string]*launchCounts // worker id → its counters
}

// memberSeen is one worker id's assignment in a view.
type memberSeen struct {
	incarnation string
	epoch       uint64
	ranges      string
	held        lease.Ranges
}

// launchCounts sums a worker's counters over its launches: base holds the last values read from
// the launches before the current one, whose counters started again from zero.
type launchCounts struct {
	launch int
	base   map[string]float64
	last   map[string]float64
}

func newWatcher(c *proc.Cluster) *watcher {
	return &watcher{c: c, members: map[string]memberSeen{}, launches: map[string]*launchCounts{}}
}

// run polls until ctx ends.
func (w *watcher) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.pollView(ctx)
		for _, wk := range w.c.Workers() {
			w.scrape(ctx, wk)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollView reads the leader's view and counts, per active worker id, a new (incarnation, epoch)
// and a change of ranges since the last view that showed the id.
func (w *watcher) pollView(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, v, err := w.c.Leader(ctx)
	if err != nil {
		return
	}
	r, ok := w.c.RingOf(v)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { w.viewed = true }()
	for _, m := range r.Members {
		if m.State != admin.MemberActive {
			continue
		}
		held, err := lease.DecodeRanges(m.Ranges)
		if err != nil {
			continue
		}
		now := memberSeen{incarnation: m.Incarnation, epoch: m.Epoch, ranges: rangesKey(m.Ranges), held: held}
		before, seen := w.members[m.WorkerID]
		w.members[m.WorkerID] = now
		if w.viewed {
			w.idMoved += held.Subtract(before.held).Fraction()
		}
		if !seen {
			continue // the first view of the id (the start of the watch, or a join)
		}
		if before.incarnation != now.incarnation || before.epoch != now.epoch {
			w.epochs++
		}
		if before.ranges != now.ranges {
			w.ranges++
		}
	}
}

func rangesKey(rs []lease.WireRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Start + ".." + r.End
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// scrape reads one worker's counters, if it answers.
func (w *watcher) scrape(ctx context.Context, wk *proc.Worker) {
	if !wk.Running() {
		return
	}
	launch := wk.Launches()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := wk.Metrics(ctx)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	lc := w.launches[wk.ID]
	if lc == nil {
		lc = &launchCounts{launch: launch, base: map[string]float64{}}
		w.launches[wk.ID] = lc
	}
	if lc.launch != launch {
		for k, v := range lc.last {
			lc.base[k] += v
		}
		lc.launch, lc.last = launch, nil
	}
	lc.last = map[string]float64{}
	for _, name := range workerCounters {
		lc.last[name] = m.Sum(name)
	}
}

// snapshot reads every worker and coordinator now and returns the totals.
func (w *watcher) snapshot(ctx context.Context) counts {
	for _, wk := range w.c.Workers() {
		w.scrape(ctx, wk)
	}
	w.pollView(ctx)
	moved := 0.0
	for _, co := range w.c.Coordinators() {
		moved += scrapeSum(ctx, co.URL("/metrics"), tokensMoved)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c := counts{at: time.Now(), moved: moved, epochs: w.epochs, ranges: w.ranges, idMoved: w.idMoved, worker: map[string]float64{}}
	for _, lc := range w.launches {
		for _, name := range workerCounters {
			c.worker[name] += lc.base[name] + lc.last[name]
		}
	}
	return c
}

// scrapeSum reads one series family from a /metrics page (0 when it does not answer).
func scrapeSum(ctx context.Context, url, name string) float64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	return proc.ParseMetrics(b).Sum(name)
}
