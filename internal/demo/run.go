package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/proc"
)

// Periods and bounds of the run's own activities.
const (
	// scanEvery is the period of the directory and dead-letter scans: often enough that a
	// window's copies are counted before it opens (2 s after its start).
	scanEvery = 1500 * time.Millisecond
	// setupWait bounds starting the processes and settling the ring, and each restart after a
	// fault.
	setupWait = 90 * time.Second
)

// Run runs the demo, writing live progress and the summary to out, and returns the summary.
// The error is ErrLost when a recorded transaction was neither done nor dead-lettered at the
// end, ErrInterrupted when ctx ended first (a signal), or what made the setup fail.
func Run(ctx context.Context, cfg Config, out io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	cfg = cfg.withDefaults()
	r := &runner{cfg: cfg, out: out, started: cfg.Now(), drained: make(chan struct{})}
	r.screen = newScreen(out, cfg.Display, r.started)
	r.faults = newFaults(cfg, r.event, r.drained)
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

// runner is one run: what it set up, and the parts that work on it (the burst, the faults, the
// loop's progress).
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

	burst    *burst
	faults   *faults
	progress progress
	// drained is closed once every recorded transaction is done or dead-lettered: a phase still
	// waiting for work to act on stops waiting.
	drained chan struct{}
}

func (r *runner) now() time.Time { return r.cfg.Now() }

func (r *runner) event(format string, args ...any) { r.screen.event(r.now(), format, args...) }

func (r *runner) run(ctx context.Context) (sum Summary, err error) {
	cfg := r.cfg
	path := "W+1 (the path a regular service takes)"
	if cfg.Backdate > 0 {
		path = fmt.Sprintf("--backdate %v (late writes, readable at once)", cfg.Backdate)
	}
	outage := "the downstream never answers 503"
	if cfg.Duration503 > 0 {
		outage = fmt.Sprintf("the downstream answers 503 from the first call until it has refused %d calls and %v has passed", min(outageRefusals, cfg.Count), cfg.Duration503)
	}
	r.screen.say(fmt.Sprintf("retryring demo: %s failures across %d instances, %s; %d coordinators, %d workers; %s",
		num(cfg.Count), cfg.Instances, path, cfg.Coordinators, cfg.Workers, outage))

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

	runCtx, cancel := context.WithCancel(ctx)
	r.group.Store(g)
	defer func() {
		cancel()
		r.faults.wait() // no restart may race with the stop
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
