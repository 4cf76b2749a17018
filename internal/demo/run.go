package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
)

// Periods and bounds of the run's own activities.
const (
	// scanEvery is the period of the directory and dead-letter scans: often enough that a
	// window's copies are counted before it opens (2 s after its start).
	scanEvery = 1500 * time.Millisecond
	// setupWait bounds starting the processes and settling the ring.
	setupWait = 90 * time.Second
	// cleanupWait bounds the wait, after the drain, for the workers to delete the buckets they
	// finished (tiers 3-5 of open windows).
	cleanupWait = 20 * time.Second
	// importBatch is the number of failures one late-protocol write publishes (--backdate).
	importBatch = 1000
	// recordAttempts bounds the tries of one failure: a write that misses its window's start is
	// given up and retried into a later window, as a regular service would.
	recordAttempts = 3
	// tableWindows is how many windows the terminal table shows.
	tableWindows = 6
)

// Run runs the demo, writing live progress and the summary to out, and returns the summary.
// The error is ErrLost when a recorded transaction was neither done nor dead-lettered at the
// end, ErrInterrupted when ctx ended first (a signal), or what made the setup fail.
func Run(ctx context.Context, cfg Config, out io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	cfg = cfg.withDefaults()
	r := &runner{cfg: cfg, out: out, started: cfg.Now(), states: map[string]string{}}
	r.screen = newScreen(out, cfg.Display, r.started)
	sum, err := r.run(ctx)
	if sum.Recorded > 0 || sum.Executions > 0 {
		// After every process stopped and the keyspace was dropped: the summary is the last
		// thing on the screen.
		for _, l := range sum.Lines() {
			fmt.Fprintln(out, l)
		}
	}
	if ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
		if err == nil {
			err = ErrInterrupted
		} else {
			err = fmt.Errorf("%w: %w", ErrInterrupted, err)
		}
	}
	return sum, err
}

type runner struct {
	cfg     Config
	out     io.Writer
	started time.Time
	screen  *screen

	session *gocql.Session
	store   *cassandra.Store
	logDir  string
	cluster *proc.Cluster
	// group is the processes' group for the second-signal watcher, which runs on its own
	// goroutine and must kill even what a start that failed half-way left.
	group atomic.Pointer[proc.Group]
	insp  *inspector
	// background are the inspector and the leader poll: waited for before the processes stop
	// and the session closes.
	background sync.WaitGroup
	leader     leaderPoll

	// The burst.
	mu         sync.Mutex
	own        map[window.Window][]string
	written    atomic.Int64
	recordTime time.Duration

	// Faults and process states shown beside the ring ("killed", "restarting").
	faults      sync.WaitGroup
	faultsLeft  atomic.Int32
	stateMu     sync.Mutex
	states      map[string]string
	killed      string
	inFlight    int
	lastFault   time.Time
	unavailable atomic.Bool
}

func (r *runner) now() time.Time { return r.cfg.Now() }

func (r *runner) event(format string, args ...any) { r.screen.event(r.now(), format, args...) }

func (r *runner) setState(name, state string) {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if state == "" {
		delete(r.states, name)
	} else {
		r.states[name] = state
	}
}

func (r *runner) run(ctx context.Context) (sum Summary, err error) {
	cfg := r.cfg
	path := "W+1 (the path a regular service takes)"
	if cfg.Backdate > 0 {
		path = fmt.Sprintf("--backdate %v (late writes, readable at once)", cfg.Backdate)
	}
	r.screen.say(fmt.Sprintf("retryring demo: %s failures across %d instances, %s; %d coordinators, %d workers; the downstream answers 503 for %v once the first window opens",
		num(cfg.Count), cfg.Instances, path, cfg.Coordinators, cfg.Workers, cfg.Duration503))

	// A second Ctrl-C while stopping kills every process at once.
	defer r.watchSecondSignal(ctx)()

	if r.session, err = ensureCassandra(ctx, cfg, r.out); err != nil {
		return sum, err
	}
	defer r.session.Close()
	if err := createKeyspace(ctx, r.session, cfg.Keyspace); err != nil {
		return sum, err
	}
	r.screen.say(fmt.Sprintf("keyspace %s created (%s at the end)", cfg.Keyspace, map[bool]string{true: "kept", false: "dropped"}[cfg.Keep]))
	defer r.dropKeyspace()
	if r.store, err = cassandra.NewStore(r.session, cassandra.StoreConfig{
		Keyspace: cfg.Keyspace, Ring: cfg.Ring, WindowMinutes: cfg.WindowMinutes,
	}); err != nil {
		return sum, err
	}

	if r.logDir = cfg.LogDir; r.logDir == "" {
		if r.logDir, err = os.MkdirTemp("", "retryring-demo-"); err != nil {
			return sum, err
		}
	}
	g, err := proc.GroupIn(r.logDir)
	if err != nil {
		return sum, err
	}
	r.screen.say("logs of every process: " + r.logDir)
	defer func() { r.removeLogs(err) }()
	r.unavailable.Store(cfg.Duration503 > 0)

	runCtx, cancel := context.WithCancel(ctx)
	r.group.Store(g)
	defer func() {
		cancel()
		r.faults.Wait() // no restart may race with the stop
		r.background.Wait()
		r.screen.say("stopping: workers leave the ring, then the coordinators stop")
		r.stopFleet(g)
	}()
	if err := r.startFleet(runCtx, g); err != nil {
		return sum, err
	}
	r.insp = newInspector(r.store, cfg.MaxClockOffset, r.now)
	r.background.Add(2)
	go func() {
		defer r.background.Done()
		r.insp.run(runCtx, scanEvery)
	}()
	go func() {
		defer r.background.Done()
		r.leader.run(runCtx, r.cluster, cfg.Refresh)
	}()

	sum, err = r.drive(runCtx)
	r.screen.release()
	return sum, err
}

// drive records the burst, shows progress, runs the faults, and returns the summary once
// every transaction finished (or the timeout passed, or ctx ended).
func (r *runner) drive(ctx context.Context) (Summary, error) {
	cfg := r.cfg
	burst := make(chan error, 1)
	go func() { burst <- r.recordBurst(ctx) }()

	var (
		burstDone              bool
		drainStart, drainedAt  time.Time
		recovered              = cfg.Duration503 == 0
		workerKilled, leaderKO bool
		lastExecs              int
		lastTick               = r.now()
		plainTable             time.Time
		cleanupFrom            time.Time
		ledger                 Ledger
	)
	tick := time.NewTicker(cfg.Refresh)
	defer tick.Stop()
	for {
		now := r.now()
		select {
		case err := <-burst:
			burstDone = true
			if err != nil {
				return Summary{}, err
			}
			drainStart = r.drainStart(now)
			r.event("burst recorded: %s failures in %v into %s; workers open the first one at %s UTC (in %s)",
				num(int(r.written.Load())), r.recordTime.Round(time.Millisecond), r.burstWindows(),
				drainStart.UTC().Format("15:04:05"), clock(drainStart.Sub(now)))
		default:
		}

		if burstDone && !now.Before(drainStart) {
			r.insp.rows.Store(true)
			since := now.Sub(drainStart)
			if !recovered && since >= cfg.Duration503 {
				recovered = true
				r.cluster.Downstream.SetUnavailable(false)
				r.unavailable.Store(false)
				r.event("downstream recovered: it answers 200 from now on (what failed meanwhile waits in a later window)")
			}
			if !cfg.NoFaults && !workerKilled && since >= cfg.Schedule.WorkerKill {
				workerKilled = true
				r.killWorker(ctx)
			}
			if !cfg.NoFaults && !leaderKO && since >= cfg.Schedule.LeaderKill {
				leaderKO = true
				r.killLeader(ctx)
			}
		}

		ledger = r.ledger(now)
		faultsDone := cfg.NoFaults || (workerKilled && leaderKO && r.faultsLeft.Load() == 0)
		if burstDone && drainedAt.IsZero() && ledger.Lost == 0 && ledger.Recorded > 0 {
			drainedAt = now
			r.event("drained: every recorded transaction is done or dead-lettered, %v after the first window opened",
				now.Sub(drainStart).Round(time.Second))
		}
		finished := false
		if !drainedAt.IsZero() && faultsDone {
			if cleanupFrom.IsZero() {
				cleanupFrom = now
			}
			lo, err := r.insp.leftover(ctx)
			finished = (err == nil && lo.Rows-lo.RowsNotOpen == 0) || now.Sub(cleanupFrom) >= cleanupWait
		}

		execRate := 0.0
		if dt := now.Sub(lastTick).Seconds(); dt > 0 {
			execRate = float64(ledger.Executions-lastExecs) / dt
		}
		lastExecs, lastTick = ledger.Executions, now
		v := r.view(now, ledger, execRate, burstDone, drainStart, drainedAt, faultsDone)
		if !r.screen.tty && now.Sub(plainTable) >= 10*time.Second && len(ledger.Windows) > 0 {
			plainTable = now
			r.screen.say(windowLines(ledger, now)...)
		}
		r.screen.frame(v)

		timedOut := burstDone && now.Sub(drainStart) > cfg.Timeout
		if finished || timedOut || ctx.Err() != nil {
			if !burstDone {
				// It ends with ctx; its writes must be over before finish reads them.
				if err := <-burst; err != nil && !errors.Is(err, context.Canceled) {
					r.event("recording stopped: %v", err)
				}
			}
			if timedOut && drainedAt.IsZero() {
				r.event("timeout: %s transactions not finished %v after the first window opened", num(ledger.Lost), cfg.Timeout)
			}
			return r.finish(ctx, burstDone, drainStart, drainedAt)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// drainStart is when the first window of the burst opens to the workers.
func (r *runner) drainStart(now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := time.Time{}
	for w := range r.own {
		if o := w.Start().Add(r.cfg.MaxClockOffset); first.IsZero() || o.Before(first) {
			first = o
		}
	}
	if first.IsZero() || first.Before(now) && r.cfg.Backdate > 0 {
		return now // late writes are readable at once
	}
	return first
}

// ledger gathers the accounting inputs and computes the ledger.
func (r *runner) ledger(now time.Time) Ledger {
	r.mu.Lock()
	own := make(map[window.Window][]string, len(r.own))
	for w, ids := range r.own {
		own[w] = ids // appended to only under r.mu; the slice header copy is a snapshot
	}
	r.mu.Unlock()
	seen, dead, _ := r.insp.state()
	return account(ledgerInput{
		Now: now, Offset: r.cfg.MaxClockOffset, Length: r.cfg.WindowMinutes,
		Own: own, Seen: seen, Execs: r.cluster.Downstream.Executions(), Dead: dead,
	})
}

// view builds a frame.
func (r *runner) view(now time.Time, l Ledger, rate float64, burstDone bool, drainStart, drainedAt time.Time, faultsDone bool) view {
	co, rv := r.leader.last()
	v := view{
		Now: now, Started: r.started, Keyspace: r.cfg.Keyspace, Ring: r.cfg.Ring, Ledger: l, ExecRate: rate,
		MaxWindows: tableWindows,
	}
	if co != nil && co.Running() {
		v.AdminURL, v.Leader, v.Term = co.URL("/"), co.ID, rv.RaftTerm
		ring, _ := r.cluster.RingOf(rv)
		v.Generation = ring.Generation
		v.Members = members(ring, now)
	}
	if r.unavailable.Load() {
		left := max(drainStart.Add(r.cfg.Duration503).Sub(now), 0)
		if burstDone && !now.Before(drainStart) {
			v.Downstream = fmt.Sprintf("503 Service Unavailable (recovers in %s)", clock(left))
		} else {
			v.Downstream = fmt.Sprintf("503 Service Unavailable (until the first window has been open %v)", r.cfg.Duration503)
		}
	} else {
		v.Downstream = fmt.Sprintf("200 OK (%.1f%% of transactions refused with a permanent 422)", 100*r.cfg.PermanentFraction)
	}
	v.Phase = r.phase(now, l, burstDone, drainStart, drainedAt, faultsDone)

	nodeState := map[string]string{}
	for _, n := range rv.Coordinators {
		nodeState[n.ID] = n.State
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	for _, c := range r.cluster.Coordinators() {
		state := r.states[c.ID]
		switch {
		case state != "":
		case !c.Running():
			state = "down"
		case nodeState[c.ID] != "":
			state = nodeState[c.ID]
		default:
			state = "running"
		}
		v.Coordinators = append(v.Coordinators, procRow{Name: c.ID, State: state})
	}
	for _, w := range r.cluster.Workers() {
		state := r.states[w.ID]
		if state == "" {
			state = map[bool]string{true: "running", false: "down"}[w.Running()]
		}
		v.Workers = append(v.Workers, procRow{Name: w.ID, State: state})
	}
	return v
}

// phase says in words what the run is doing.
func (r *runner) phase(now time.Time, l Ledger, burstDone bool, drainStart, drainedAt time.Time, faultsDone bool) string {
	switch {
	case !burstDone:
		return fmt.Sprintf("recording the burst: %s of %s failures written", num(int(r.written.Load())), num(r.cfg.Count))
	case now.Before(drainStart):
		return fmt.Sprintf("burst recorded; the workers open its window at %s UTC, in %s (max_clock_offset after its start)",
			drainStart.UTC().Format("15:04:05"), clock(drainStart.Sub(now)))
	case !drainedAt.IsZero() && !faultsDone:
		return "drained; the scheduled faults are still under way"
	case !drainedAt.IsZero():
		return "drained; waiting for the workers to delete their finished buckets"
	}
	openPending, next := 0, WindowRow{}
	for _, w := range l.Windows {
		switch {
		case w.Open(now):
			openPending += w.Pending
		case w.Pending > 0 && next.Recorded == 0:
			next = w
		}
	}
	if openPending == 0 && next.Recorded > 0 {
		return fmt.Sprintf("waiting for window %s (%s retries) to open, in %s", windowName(next), num(next.Pending), clock(next.Opens.Sub(now)))
	}
	if r.unavailable.Load() {
		return "draining; the downstream answers 503, so each failure is recorded again into a later window"
	}
	return "draining"
}

// recordBurst records the failures as cfg.Instances regular-service instances would.
func (r *runner) recordBurst(ctx context.Context) error {
	cfg := r.cfg
	started := r.now()
	defer func() { r.recordTime = r.now().Sub(started) }()
	recs := make([]*recorder.Recorder, cfg.Instances)
	for i := range recs {
		var err error
		if recs[i], err = recorder.New(r.store, recorder.Config{InstanceID: fmt.Sprintf("%s-pod-%d", cfg.Ring.Service, i)}); err != nil {
			return err
		}
	}
	prefix := fmt.Sprintf("%s-%s-", cfg.Ring.Service, started.UTC().Format("150405"))
	failure := func(i int) recorder.Failure {
		return recorder.Failure{TransactionID: fmt.Sprintf("%s%06d", prefix, i), ImplType: "PaymentStep", AllocationKey: fmt.Sprint(i % 97)}
	}
	r.mu.Lock()
	r.own = map[window.Window][]string{}
	r.mu.Unlock()
	note := func(w window.Window, ids ...string) {
		r.mu.Lock()
		r.own[w] = append(r.own[w], ids...)
		r.mu.Unlock()
		r.written.Add(int64(len(ids)))
	}

	if cfg.Backdate > 0 {
		target, err := window.Of(started.Add(-cfg.Backdate), cfg.WindowMinutes)
		if err != nil {
			return err
		}
		target = target.Next()
		for i, k := 0, 0; i < cfg.Count; k++ {
			n := min(importBatch, cfg.Count-i)
			fs := make([]recorder.Failure, n)
			ids := make([]string, n)
			for j := range fs {
				fs[j] = failure(i + j)
				ids[j] = fs[j].TransactionID
			}
			if err := recs[k%len(recs)].RecordAt(ctx, target, fs...); err != nil {
				return fmt.Errorf("demo: record %d failures into %v: %w", n, target, err)
			}
			note(target, ids...)
			i += n
		}
		return nil
	}

	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range cfg.RecordConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Count || ctx.Err() != nil {
					return
				}
				f := failure(i)
				var err error
				for range recordAttempts {
					var key cassandra.BucketKey
					if key, err = recs[i%len(recs)].Record(ctx, f); err == nil {
						note(key.Window, f.TransactionID)
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
		r.event("%d failures could not be recorded (first error: %v); they are left out of the count", n, firstErr)
	}
	return nil
}

// killWorker kills the worker with the most executions under way at the downstream, then
// launches it again after the schedule's delay.
func (r *runner) killWorker(ctx context.Context) {
	inFlight := map[string]int{}
	for _, e := range r.cluster.Downstream.Executions() {
		if e.Running() {
			inFlight[e.WorkerID]++
		}
	}
	var victim *proc.Worker
	for _, w := range r.cluster.Workers() {
		if w.Running() && (victim == nil || inFlight[w.ID] > inFlight[victim.ID]) {
			victim = w
		}
	}
	if victim == nil {
		return
	}
	pid := victim.Pid()
	if err := victim.Kill9(); err != nil {
		r.event("kill -9 %s failed: %v", victim.ID, err)
		return
	}
	r.stateMu.Lock()
	r.killed, r.inFlight, r.lastFault = victim.ID, inFlight[victim.ID], r.now()
	r.stateMu.Unlock()
	r.setState(victim.ID, "killed")
	r.event("kill -9 worker %s (pid %d) with %d executions under way at the downstream: its ranges move once its lease (TTL 3 s) has expired",
		victim.ID, pid, inFlight[victim.ID])
	r.faults.Add(1)
	r.faultsLeft.Add(1)
	go func() {
		defer r.faults.Done()
		defer r.faultsLeft.Add(-1)
		if !sleep(ctx, r.cfg.Schedule.WorkerRestart) {
			return
		}
		r.setState(victim.ID, "restarting")
		wctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if err := victim.Restart(); err != nil {
			r.event("restart %s failed: %v", victim.ID, err)
			return
		}
		if err := r.cluster.WaitWorker(wctx, victim); err != nil {
			r.event("restarted %s does not answer: %v", victim.ID, err)
			return
		}
		r.setState(victim.ID, "")
		r.event("worker %s restarted (pid %d, a new incarnation): it gets ranges only after the old incarnation's lease expired", victim.ID, victim.Pid())
		if v, err := r.cluster.WaitSettled(wctx); err == nil {
			ring, _ := r.cluster.RingOf(v)
			r.event("ring settled again: %d workers cover the ring (generation %d)", r.cfg.Workers, ring.Generation)
		}
	}()
}

// killLeader kills the coordinator leader, reports the election of the next one, and launches
// the old leader again after the schedule's delay.
func (r *runner) killLeader(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	co, _, err := r.cluster.Leader(lctx)
	cancel()
	if err != nil {
		r.event("no leader to kill: %v", err)
		return
	}
	pid := co.Pid()
	killedAt := r.now()
	if err := co.Kill9(); err != nil {
		r.event("kill -9 %s failed: %v", co.ID, err)
		return
	}
	r.stateMu.Lock()
	r.lastFault = killedAt
	r.stateMu.Unlock()
	r.setState(co.ID, "killed")
	r.event("kill -9 coordinator leader %s (pid %d): workers keep their leases while the others elect a new leader", co.ID, pid)
	r.faults.Add(1)
	r.faultsLeft.Add(1)
	go func() {
		defer r.faults.Done()
		defer r.faultsLeft.Add(-1)
		wctx, cancel := context.WithTimeout(ctx, setupWait)
		defer cancel()
		if next, err := r.cluster.WaitLeader(wctx); err == nil {
			_, v, _ := r.cluster.Leader(wctx)
			r.event("coordinator %s is the new leader (term %d), %v after the kill; ring page now %s",
				next.ID, v.RaftTerm, r.now().Sub(killedAt).Round(10*time.Millisecond), next.URL("/"))
		}
		if !sleep(ctx, max(r.cfg.Schedule.LeaderRestart-r.now().Sub(killedAt), 0)) {
			return
		}
		r.setState(co.ID, "restarting")
		if err := co.Restart(); err != nil {
			r.event("restart %s failed: %v", co.ID, err)
			return
		}
		if err := co.WaitHealthy(wctx); err != nil {
			r.event("restarted %s does not answer: %v", co.ID, err)
			return
		}
		r.setState(co.ID, "")
		r.event("coordinator %s restarted (pid %d): it rejoins from its Raft log as a follower", co.ID, co.Pid())
	}()
}

// finish reads the final state and builds the summary.
func (r *runner) finish(ctx context.Context, burstDone bool, drainStart, drainedAt time.Time) (Summary, error) {
	// The last scan, and the leftover read, run even after an interrupt: they are quick and
	// tell what an interrupted run left.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = r.insp.scan(fctx)
	l := r.ledger(r.now())
	s := newSummary(l)
	s.Keyspace, s.Instances, s.Backdate, s.RecordTime = r.cfg.Keyspace, r.cfg.Instances, r.cfg.Backdate, r.recordTime
	s.Concurrency, s.Kept = r.cfg.WorkerConcurrency, r.cfg.Keep
	r.stateMu.Lock()
	s.Killed, s.InFlightAtKill = r.killed, r.inFlight
	lastFault := r.lastFault
	r.stateMu.Unlock()
	s.Interrupted = ctx.Err() != nil && drainedAt.IsZero()
	if !drainedAt.IsZero() {
		s.Drained = true
		s.DrainTime = drainedAt.Sub(drainStart)
		if !lastFault.IsZero() && drainedAt.After(lastFault) {
			s.AfterLastFault = drainedAt.Sub(lastFault)
		}
	}
	s.Leftover, s.LeftoverErr = r.insp.leftover(fctx)
	s.Events = r.screen.Events()
	r.screen.frame(r.view(r.now(), l, 0, burstDone, drainStart, drainedAt, true))
	switch {
	case s.Lost > 0 && !s.Interrupted:
		return s, fmt.Errorf("%w: %d of %d", ErrLost, s.Lost, s.Recorded)
	case s.Interrupted:
		return s, ErrInterrupted
	}
	return s, nil
}

// watchSecondSignal kills every process at once on a signal that arrives after ctx ended (the
// first Ctrl-C started a graceful stop). The returned function stops watching.
func (r *runner) watchSecondSignal(ctx context.Context) func() {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		fmt.Fprintln(r.out, "stopping gracefully; press Ctrl-C again to kill every process at once")
		select {
		case <-ch:
			if g := r.group.Load(); g != nil {
				_ = g.Close()
			}
		case <-done:
		}
	}()
	return func() {
		close(done)
		signal.Stop(ch)
	}
}

func (r *runner) dropKeyspace() {
	if r.cfg.Keep {
		r.screen.say("keyspace " + r.cfg.Keyspace + " kept (--keep)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*schemaTimeout)
	defer cancel()
	if err := dropKeyspace(ctx, r.session, r.cfg.Keyspace); err != nil {
		r.screen.say(fmt.Sprintf("could not drop keyspace %s: %v", r.cfg.Keyspace, err))
		return
	}
	r.screen.say("keyspace " + r.cfg.Keyspace + " dropped")
}

// removeLogs removes the log directory the run made, unless it is to be kept: --keep, a
// directory given by the caller, or a failed run (the logs say why).
func (r *runner) removeLogs(err error) {
	if r.logDir == "" {
		return
	}
	if r.cfg.Keep || r.cfg.LogDir != "" || (err != nil && !errors.Is(err, ErrInterrupted)) {
		r.screen.say("logs kept in " + r.logDir)
		return
	}
	_ = os.RemoveAll(r.logDir)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// burstWindows names the windows the burst went into, with their counts.
func (r *runner) burstWindows() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := make([]window.Window, 0, len(r.own))
	for w := range r.own {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].Compare(ws[j]) < 0 })
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("window %s (%s)", w.Start().UTC().Format("15:04"), num(len(r.own[w])))
	}
	return strings.Join(parts, " and ")
}
