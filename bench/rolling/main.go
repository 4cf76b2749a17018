package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

// options are the program's flags.
type options struct {
	flags       benchkit.Flags
	binary      string
	modes       []string
	workers     int
	rate        float64
	instances   int
	concurrency int
	latency     time.Duration
	baseline    time.Duration
	rounds      int
	joinLeave   bool
	tail        time.Duration
	drainBound  time.Duration
	poll        time.Duration
}

func main() {
	var o options
	o.flags.Register(flag.CommandLine)
	modes := flag.String("modes", "contiguous,minimal", "assignment modes to run, one after the other (ctl movement)")
	flag.StringVar(&o.binary, "binary", "", "retryring binary (default: build it)")
	flag.IntVar(&o.workers, "workers", 10, "workers of the ring")
	flag.Float64Var(&o.rate, "rate", 60, "failures recorded per second, all through the run")
	flag.IntVar(&o.instances, "instances", 200, "instance ids the failures are spread over")
	flag.IntVar(&o.concurrency, "concurrency", 4, "each worker's --concurrency")
	flag.DurationVar(&o.latency, "latency", 250*time.Millisecond, "the stub downstream's answer time: with -concurrency it sets how long a window takes to drain")
	flag.DurationVar(&o.baseline, "baseline", 2*time.Minute, "load with no change before the restarts (the baseline); the restarts then wait for the next window to become readable")
	flag.IntVar(&o.rounds, "rounds", 1, "times every worker is restarted, one after the other")
	flag.BoolVar(&o.joinLeave, "join-leave", true, "after the restarts, a worker joins and then leaves (SIGTERM)")
	flag.DurationVar(&o.tail, "tail", time.Minute, "load after the last change, before it stops")
	flag.DurationVar(&o.drainBound, "drain-bound", 3*time.Minute, "how long to wait, once the load stopped, for every failure to be done")
	flag.DurationVar(&o.poll, "poll", 500*time.Millisecond, "how often the leader's view and the workers' counters are read")
	maxRun := flag.Duration("max-run", 40*time.Minute, "the whole program's bound: every wait ends by then")
	flag.Parse()
	o.modes = strings.Split(*modes, ",")
	for _, m := range o.modes {
		if m != "contiguous" && m != "minimal" {
			benchkit.Fail(fmt.Errorf("-modes: %q is not contiguous or minimal", m))
		}
	}
	if o.workers < 2 || o.rate <= 0 || o.instances < 1 || o.rounds < 0 || o.baseline < time.Minute {
		benchkit.Fail(errors.New("want -workers ≥ 2, -rate > 0, -instances ≥ 1, -rounds ≥ 0, -baseline ≥ 1m (one whole window)"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *maxRun)
	defer cancel()
	s, err := o.flags.Connect(ctx)
	if err != nil {
		benchkit.Fail(err)
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	if o.binary == "" {
		root, err := proc.ModuleRoot()
		if err != nil {
			benchkit.Fail(err)
		}
		o.binary = filepath.Join(os.TempDir(), "retryring-rolling-bench")
		if err := proc.Build(ctx, root, o.binary, false); err != nil {
			benchkit.Fail(err)
		}
	}
	fmt.Printf("load:      %.0f failures/s into the next 1-minute window, over %d instances; %d workers at concurrency %d; the stub answers in %v; coordinator and worker defaults\n",
		o.rate, o.instances, o.workers, o.concurrency, o.latency)
	var results []result
	for _, mode := range o.modes {
		benchkit.Logf("mode %s: start", mode)
		r, err := o.run(ctx, s, mode)
		if err != nil {
			benchkit.Fail(fmt.Errorf("mode %s: %w", mode, err))
		}
		benchkit.Logf("mode %s: done, load avg %s", mode, benchkit.LoadAvg())
		results = append(results, r)
	}
	printResults(os.Stdout, results)
	fmt.Printf("\nload avg:  %s at the end\n", benchkit.LoadAvg())
}

// run is one mode's cluster, load and phases.
func (o *options) run(ctx context.Context, s *gocql.Session, mode string) (res result, err error) {
	res.mode = mode
	dir, err := os.MkdirTemp("", "rolling-bench-")
	if err != nil {
		return res, err
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		return res, err
	}
	ks := benchkit.KeyspaceName("rolling_" + mode)
	res.keyspace = ks
	c, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: o.binary, Workers: -1, Cassandra: o.flags.Addr, Keyspace: ks, Concurrency: o.concurrency,
		Downstream: downstream.Config{Latency: o.latency},
	})
	defer func() {
		if c != nil {
			_ = c.Close()
		} else {
			_ = g.Close()
		}
		o.flags.DropKeyspace(s, ks)
		if err != nil || o.flags.Keep {
			fmt.Fprintf(os.Stderr, "logs kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	if err != nil {
		return res, err
	}
	if err := ctl(ctx, c, o.binary, "movement", c.Options().Ring.String(), mode); err != nil {
		return res, err
	}
	if _, err := c.AddWorkers(ctx, o.workers); err != nil {
		return res, err
	}
	if _, err := waitSettled(ctx, c); err != nil {
		return res, err
	}

	w := newWatcher(c)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go w.run(watchCtx, o.poll)
	sampler := c.SampleLeases(samplePeriod)
	defer sampler.Stop()

	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: c.Options().Ring, WindowMinutes: c.Options().WindowMinutes})
	if err != nil {
		return res, err
	}
	// Unchecked: a benchmark on one host, whose workers share this process's clock.
	rec, err := recorder.New(st, recorder.Config{InstanceID: "rolling-bench", UncheckedClock: true, WindowMinutes: c.Options().WindowMinutes})
	if err != nil {
		return res, err
	}
	ld := &load{rec: rec, rate: o.rate, instances: o.instances, prefix: mode[:1] + "-"}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() { defer close(loadDone); ld.run(loadCtx) }()

	mark := func(name string) {
		snap := w.snapshot(ctx)
		rep := sampler.Report()
		res.marks = append(res.marks, phaseMark{name: name, counts: snap, gaps: rep.Workers.Gaps})
		benchkit.Logf("mode %s: %s from %s", mode, name, snap.at.UTC().Format("15:04:05"))
	}
	mark("baseline")
	if err := sleep(ctx, o.baseline); err != nil {
		return res, err
	}
	if o.rounds > 0 {
		// The restarts begin just before a window becomes readable, so that they run while its
		// rows are being executed: that is when a handover can delay executions.
		if err := alignToWindow(ctx); err != nil {
			return res, err
		}
		mark("rolling restart")
		for round := range o.rounds {
			for _, wk := range c.Workers() {
				step, err := restart(ctx, c, w, wk)
				if err != nil {
					return res, fmt.Errorf("round %d, %s: %w", round+1, wk.ID, err)
				}
				res.steps = append(res.steps, step)
			}
		}
		if err := settle(ctx, c); err != nil {
			return res, err
		}
	}
	if o.joinLeave {
		// Aligned like the restarts, so that the moved ranges hold pending instances.
		if err := alignToWindow(ctx); err != nil {
			return res, err
		}
		mark("join")
		wk, err := c.AddWorker(ctx)
		if err != nil {
			return res, err
		}
		if err := settle(ctx, c); err != nil {
			return res, err
		}
		if err := alignToWindow(ctx); err != nil {
			return res, err
		}
		mark("leave")
		w.scrape(ctx, wk)
		if err := wk.Term(proc.DefaultTermWait); err != nil {
			return res, fmt.Errorf("%s: SIGTERM: %w", wk.ID, err)
		}
		if err := settle(ctx, c); err != nil {
			return res, err
		}
	}
	mark("tail")
	if err := sleep(ctx, o.tail); err != nil {
		return res, err
	}
	stopLoad()
	<-loadDone
	ids, errs, lastErr := ld.recorded()
	res.recorded, res.recordErrs, res.lastRecordErr = len(ids), errs, lastErr
	benchkit.Logf("mode %s: load stopped, %d recorded (%d failed writes); waiting for the drain", mode, len(ids), errs)
	res.drained = waitDone(ctx, c, ids, o.drainBound)
	mark("end")
	res.execs = c.Downstream.Executions()
	res.ids = ids
	return res, nil
}

// samplePeriod is the lease sampler's: how often every worker's /readyz is asked for its lease.
const samplePeriod = 250 * time.Millisecond

// restartLead is how long before a window becomes readable the restarts begin.
const restartLead = 500 * time.Millisecond

// alignToWindow waits until restartLead before the next window becomes readable.
func alignToWindow(ctx context.Context) error {
	return sleep(ctx, time.Until(nextReadable(time.Now()).Add(-restartLead)))
}

// nextReadable is the first instant after now at which a window becomes readable to the workers
// (its start plus max_clock_offset).
func nextReadable(now time.Time) time.Time {
	w, err := window.Of(now, 1)
	if err != nil {
		panic(err) // a length of 1 minute is valid
	}
	for at := w.Start(); ; at = at.Add(time.Minute) {
		if r := at.Add(worker.DefaultMaxClockOffset); r.After(now.Add(restartLead)) {
			return r
		}
	}
}

// restart terms a worker, launches it again with the same id and waits until the leader shows the
// new incarnation active with ranges.
func restart(ctx context.Context, c *proc.Cluster, w *watcher, wk *proc.Worker) (step, error) {
	st := step{worker: wk.ID, at: time.Now()}
	w.scrape(ctx, wk) // its counters end with it
	if err := wk.Term(proc.DefaultTermWait); err != nil {
		return st, fmt.Errorf("SIGTERM: %w", err)
	}
	st.stopped = time.Since(st.at)
	if err := c.RestartWorker(ctx, wk); err != nil {
		return st, err
	}
	if err := waitHolding(ctx, c, wk); err != nil {
		return st, err
	}
	st.holding = time.Since(st.at)
	return st, nil
}

// waitHolding waits until the leader's view shows wk's current incarnation active with ranges.
func waitHolding(ctx context.Context, c *proc.Cluster, wk *proc.Worker) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if inc := wk.Incarnation(); inc != "" {
			if _, v, err := c.Leader(ctx); err == nil {
				if r, ok := c.RingOf(v); ok {
					for _, m := range r.Members {
						if m.WorkerID == wk.ID && m.Incarnation == inc && m.State == "active" && len(m.Ranges) > 0 {
							return nil
						}
					}
				}
			}
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("%s holds no lease: %w", wk.ID, err)
		}
	}
}

// settle ends a phase of changes: it waits until the ring is settled with the running workers,
// then until each of them has ended two more cycles. A worker counts its re-scans as its cycles
// visit the windows, and under load a cycle lasts as long as a window's drain (tens of seconds):
// the cycle under way at the change may still have run on the old ranges, the next one has not.
// Without the wait a phase's re-scans would show up in the next phase.
func settle(ctx context.Context, c *proc.Cluster) error {
	if _, err := waitSettled(ctx, c); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cycles := func(wk *proc.Worker) float64 {
		m, err := wk.Metrics(ctx)
		if err != nil {
			return -1
		}
		return m.Sum("retryring_worker_cycles_total")
	}
	from := map[*proc.Worker]float64{}
	for _, wk := range c.Workers() {
		if wk.Running() {
			from[wk] = cycles(wk)
		}
	}
	for wk, n := range from {
		for n < 0 || cycles(wk) < n+2 {
			if n < 0 {
				n = cycles(wk)
			}
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				return fmt.Errorf("%s did not end two cycles: %w", wk.ID, err)
			}
		}
	}
	return nil
}

// waitSettled waits, within two minutes, for the ring to settle with the running workers.
func waitSettled(ctx context.Context, c *proc.Cluster) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := c.WaitSettled(ctx)
	return time.Since(start), err
}

// waitDone polls the stub until every id was answered done, or bound passes; it reports whether
// all were.
func waitDone(ctx context.Context, c *proc.Cluster, ids []string, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for {
		done := c.Downstream.DoneIDs()
		all := true
		for _, id := range ids {
			if !done[id] {
				all = false
				break
			}
		}
		if all || time.Now().After(deadline) || sleep(ctx, time.Second) != nil {
			return all
		}
	}
}

// ctl runs `retryring ctl <args> --coordinator <leader>`.
func ctl(ctx context.Context, c *proc.Cluster, binary string, args ...string) error {
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	_, err = c.Group.Run(ctx, proc.Spec{Name: "ctl-" + args[0], Path: binary,
		Args: append(append([]string{"ctl"}, args...), "--coordinator", leader.URL(""))})
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
