package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/internal/flaglist"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/wallclock"
	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/executor"
	"github.com/retryring/retryring/worker/leaseclient"
	"github.com/retryring/retryring/worker/retrypolicy"
)

type workerOptions struct {
	cf           cassandraFlags
	ring         ringFlags
	lf           logFlags
	tf           workerTLSFlags
	workerID     string
	coordinators string
	executorURL  string
	httpAddr     string
	retryPolicy  string
	tokenFile    string
	cfg          worker.Config
	shutdown     time.Duration
	// maxAttemptsSet: --max-attempts was given (flag or environment), which a policy file
	// would silently override.
	maxAttemptsSet bool
	// clockEvery is the period of the clock offset measurement (--clock-check-every).
	clockEvery time.Duration
	// clock is the worker's clock: nil for the system clock; tests skew it.
	clock lease.Clock
	// cassandraLostAfter is how long Cassandra may be unreachable before the worker gives its
	// ranges back (--cassandra-lost-after).
	cassandraLostAfter time.Duration
}

func newWorkerCommand() *cobra.Command { return workerCommand(&workerOptions{}) }

// workerCommand is the worker subcommand over o, which tests fill beyond the flags.
func workerCommand(op *workerOptions) *cobra.Command {
	o := op
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run one retry worker: lease client, traversal, execution and compaction",
		Long: `Run one retry worker. It joins the ring of its service through any coordinator, drains the
part of the retry directory its lease covers, and, while it is Node-0, compacts the directory.
It starts without Cassandra: /healthz answers at once, /readyz is 503 with the reason while it
waits (Cassandra unreachable, its login or TLS refused, the schema missing or too old) and retries
every 0.5 s doubling to 30 s, with jitter; meanwhile it asks the coordinators whether they admit
its token and certificate, without joining its ring. Running, it gives its ranges back when
Cassandra has been unreachable for --cassandra-lost-after, and rejoins when it is back; it is
not ready (and keeps its ranges) after 3 failed cycles in a row or 15 s of failed cycles, as when
a node answers but the consistency level cannot be met, and ready after a cycle that succeeds.
On SIGTERM or SIGINT it stops taking work, lets in-flight executions finish within their timeout
(a partial bucket stays in Cassandra), leaves the ring and exits.`,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			err := bindEnv(cmd, os.LookupEnv)
			o.maxAttemptsSet = flagGiven(cmd, "max-attempts")
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), *o) },
	}
	fs := cmd.Flags()
	o.cf.register(fs)
	o.tf.register(fs)
	o.ring.register(fs)
	o.lf.register(fs)
	fs.StringVar(&o.workerID, "worker-id", defaultWorkerID(), "this worker's id in its ring (stable across restarts)")
	fs.StringVar(&o.coordinators, "coordinators", "127.0.0.1:7878", "RSocket addresses of coordinators, host:port,...")
	fs.StringVar(&o.executorURL, "executor-url", "http://127.0.0.1:8080/retry", "URL that receives a POST per retried step")
	fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:7580", "listen address of /healthz, /readyz and /metrics; empty: none")
	fs.IntVar(&o.cfg.Concurrency, "concurrency", worker.DefaultConcurrency, "executions in flight at most")
	fs.IntVar(&o.cfg.LookbackDays, "lookback-days", worker.DefaultLookbackDays, "minimum days of history checked (older live days are never skipped)")
	fs.DurationVar(&o.cfg.MaxClockOffset, "max-clock-offset", worker.DefaultMaxClockOffset, "bound on the offset between any two processes' clocks: the worker works only while within half of it from Cassandra's")
	fs.DurationVar(&o.clockEvery, "clock-check-every", clockcheck.DefaultEvery, "period of the clock offset measurement against Cassandra (an estimate older than 3 periods is untrusted)")
	fs.IntVar(&o.cfg.MaxAttempts, "max-attempts", worker.DefaultMaxAttempts, "executions before a transient failure is dead-lettered (with --retry-policy: max_attempts in the file)")
	fs.StringVar(&o.retryPolicy, "retry-policy", "", "YAML file of per-step retry policies (attempts, max delay, status classes), keyed by stacksaga_impl_type with a default entry")
	fs.BoolVar(&o.cfg.NoBreaker, "no-breaker", false, "turn the circuit breaker off: send every admitted execution however many transient answers came before")
	fs.Float64Var(&o.cfg.MaxRate, "max-rate", 0, "executions per second at most, below this worker's share of the ring's rate limit (0: no cap)")
	fs.DurationVar(&o.cfg.QueryTimeout, "query-timeout", worker.DefaultQueryTimeout, "timeout of each CQL query (the guard demands it)")
	fs.DurationVar(&o.cfg.ExecTimeout, "exec-timeout", worker.DefaultExecTimeout, "timeout of each execution (the guard demands it)")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "bound on a graceful shutdown")
	fs.DurationVar(&o.cassandraLostAfter, "cassandra-lost-after", DefaultCassandraLostAfter, "how long Cassandra may be unreachable under a running worker (checked every second; /readyz is 503 from the first failed check) before it gives its ranges back to workers that can reach it; it rejoins when Cassandra is back. At start the worker waits for Cassandra instead, retrying every 0.5 s doubling to 30 s (with jitter), with /healthz up and /readyz 503 saying why")
	fs.StringVar(&o.tokenFile, "token-file", "", "file of this worker's ring token, sent in SETUP (else the environment variable RETRYRING_TOKEN)")
	annotateEnv(cmd)
	return cmd
}

func defaultWorkerID() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "worker"
}

func runWorker(ctx context.Context, o workerOptions) error {
	s, err := o.setup()
	if err != nil {
		return err
	}
	// Alive at once, ready once it can work: /healthz answers before Cassandra does, and /readyz
	// says what the worker waits for.
	ready := &readiness{}
	var scanner *worker.Scanner // built once Cassandra is up; the client's hooks run only after
	clientConfig := func(incarnation string) leaseclient.Config {
		return leaseclient.Config{
			WorkerID: o.workerID, Ring: s.ring, Coordinators: flaglist.Split(o.coordinators), Incarnation: incarnation,
			Token: s.token, TLS: s.coordinatorTLS, Logger: s.parent, Clock: s.clock, Guard: s.guard,
			Drain: func(ctx context.Context, old, next lease.Lease) error {
				return scanner.Drain(ctx, old, next)
			},
			Report: func() lease.Report { return scanner.Report() },
			// A lease proves the coordinators admit the worker: a refusal the credentials
			// check saw before is stale (the operator fixed the token file, say).
			OnLease: func(lease.Lease) { ready.setCoordinator("") },
		}
	}
	first, err := leaseclient.New(clientConfig(""))
	if err != nil {
		return err
	}
	deps := &dependencyStats{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newDependencyMetrics(deps), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stopHTTP, err := serveWorkerHTTP(o.httpAddr, workerIdentity{o.workerID, first.Incarnation(), s.guard, ready}, reg, s.log)
	if err != nil {
		return err
	}
	defer stopHTTP()

	session, err := s.awaitCassandra(ctx, o, first, ready, deps)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		s.log.Info().Msg("stopped before Cassandra was ready")
		return nil // nothing was started that needs stopping
	}
	if err != nil {
		return err
	}
	defer session.Close()

	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: o.cf.keyspace, Ring: s.ring, WindowMinutes: o.ring.windowMinutes, Clock: s.clock})
	if err != nil {
		return err
	}
	exec, err := executor.NewHTTP(executor.HTTPConfig{URL: o.executorURL, Policies: s.policies})
	if err != nil {
		return err
	}
	members := newRingMembership(first, func(inc string) (*leaseclient.Client, error) { return leaseclient.New(clientConfig(inc)) },
		o.shutdown, s.log)
	monitor, err := clockcheck.NewMonitor(clockcheck.Config{
		Prober: clockcheck.NewCassandraProber(session, s.clock), Clock: s.clock, MaxClockOffset: s.cfg.MaxClockOffset,
		Every: o.clockEvery, Logger: s.parent, OnChange: members.clockChanged,
	})
	if err != nil {
		return err
	}
	s.cfg.ClockCheck = monitor
	cycles := newCycleHealth(time.Now, s.log)
	s.cfg.CycleEnded = cycles.ended
	if scanner, err = worker.New(s.cfg, store, s.guard, exec); err != nil {
		return err
	}
	reg.MustRegister(worker.NewMetrics(scanner), clockcheck.NewMetrics(monitor, "worker"))
	ready.running(scanner.LeaseFit, monitor.Status, cycles.reason)
	watcher := &cassandraWatcher{
		watch: cassandraWatch{lostAfter: o.cassandraLostAfter}, ping: pingSession(session), ready: ready, stats: deps,
		log: s.log, members: members, now: time.Now,
		back: func(ctx context.Context) { _ = monitor.Measure(ctx) }, // its estimate may have gone stale meanwhile
	}
	return s.work(ctx, first.Incarnation(), scanner, members, monitor, watcher)
}

// workerSetup is what the flags make of a worker, checked before anything connects: a bad flag,
// token file or certificate is said at once, in one line.
type workerSetup struct {
	// log carries the worker id, for this command's own lines; parent does not: the lease client
	// and the scanner add their component and the worker id themselves.
	log, parent    zerolog.Logger
	ring           lease.RingKey
	cfg            worker.Config
	policies       retrypolicy.Set
	token          string
	coordinatorTLS *tls.Config
	cassandra      cassandra.Config
	// clock is the one clock of everything the worker times and stamps: windows, the guard, the
	// clock check, write stamps and a checked delete's tombstone. A test's skewed clock skews them
	// all, as a host's skewed clock would.
	clock lease.Clock
	guard *lease.Guard
}

func (o workerOptions) setup() (*workerSetup, error) {
	parent, err := o.lf.logger(stderr)
	if err != nil {
		return nil, err
	}
	s := &workerSetup{parent: parent, log: parent.With().Str("worker_id", o.workerID).Logger(), ring: o.ring.key()}
	routeRSocketLogs(s.log)
	if s.policies, err = o.policies(); err != nil {
		return nil, err
	}
	s.cfg = o.cfg
	s.cfg.Region, s.cfg.Cluster, s.cfg.Service, s.cfg.WorkerID = s.ring.Region, s.ring.Cluster, s.ring.Service, o.workerID
	s.cfg.WindowMinutes = o.ring.windowMinutes
	s.cfg.Policies = s.policies
	s.cfg.Logger = parent
	if err := s.cfg.Validate(); err != nil {
		return nil, err
	}
	if o.cassandraLostAfter <= 0 {
		return nil, fmt.Errorf("--cassandra-lost-after %v must be positive: it is how long Cassandra may be unreachable before the worker gives its ranges back", o.cassandraLostAfter)
	}
	if s.token, err = workerTokenFrom(o.tokenFile, os.LookupEnv); err != nil {
		return nil, err
	}
	if s.coordinatorTLS, err = o.tf.config(); err != nil {
		return nil, err
	}
	if s.cassandra, err = o.cf.config(); err != nil {
		return nil, err
	}
	s.cassandra.Logger = newGocqlLogger(s.log)
	// A configuration error (a consistency level, an unreadable certificate) is said at once;
	// what Cassandra itself answers is retried (awaitCassandra).
	if _, err := s.cassandra.ClusterConfig(); err != nil {
		return nil, err
	}
	s.clock = o.clock
	if s.clock == nil {
		s.clock = lease.SystemClock{}
	}
	s.cfg.Clock, s.cfg.WriteClock = s.clock, s.clock
	s.guard = lease.NewGuard(s.clock, leaseclient.DefaultGuardMargin)
	return s, nil
}

// awaitCassandra retries Cassandra until a session opens on a current schema, and meanwhile asks
// the coordinators whether they admit this worker, so that a refused token or certificate shows
// now; that check stops before the worker joins. It fails only when ctx ends (a signal before
// Cassandra was ready) or on an error that waiting cannot mend.
func (s *workerSetup) awaitCassandra(ctx context.Context, o workerOptions, first *leaseclient.Client, ready *readiness, deps *dependencyStats) (*gocql.Session, error) {
	checkCtx, stopCheck := context.WithCancel(ctx)
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		checkCredentials(checkCtx, first.CheckCredentials, ready, s.log, time.Now, wallclock.Sleep, jitter)
	}()
	gate := &cassandraGate{
		connect: func(ctx context.Context) (*gocql.Session, error) { return cassandra.Connect(ctx, s.cassandra) },
		check: func(ctx context.Context, sess *gocql.Session) error {
			return cassandra.CheckSchema(ctx, sess, o.cf.keyspace)
		},
		ready: ready, stats: deps, log: s.log, now: time.Now, sleep: wallclock.Sleep, draw: jitter,
	}
	session, err := gate.open(ctx)
	stopCheck()
	<-checkDone
	return session, err
}

// work runs the worker until ctx ends: it measures the clock first (the worker joins its ring
// only once its clock is trusted: the monitor's verdict reaches members) and leaves the ring while
// the clock is not trusted or Cassandra is lost (the watcher); then it scans until a signal, and
// stops in order: the ring left, the monitor and the watcher stopped before the session closes.
func (s *workerSetup) work(ctx context.Context, incarnation string, scanner *worker.Scanner, members *ringMembership, monitor *clockcheck.Monitor, watcher *cassandraWatcher) error {
	monitorCtx, stopMonitor := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMonitor()
	membersDone := make(chan struct{})
	go func() {
		defer close(membersDone)
		members.run(monitorCtx)
	}()
	_ = monitor.Measure(ctx) // a failure is logged; the worker stays out until a measurement succeeds
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		_ = monitor.Run(monitorCtx)
	}()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watcher.run(monitorCtx)
	}()
	s.log.Info().Str("incarnation", incarnation).Str("ring", s.ring.String()).Msg("worker started")

	runErr := scanner.Run(ctx) // returns when ctx ends (signal), after in-flight work settled
	s.log.Info().Msg("stopping: leaving the ring")
	stopMonitor()
	<-membersDone
	<-monitorDone // before the session closes under a measurement
	<-watchDone
	members.stop()
	s.log.Info().Interface("stats", scanner.Stats()).Msg("worker stopped")
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

// policies loads --retry-policy: the zero Set (the built-in policy with --max-attempts) without
// one. With one, --max-attempts would be overridden by the file without a word: refused.
func (o workerOptions) policies() (retrypolicy.Set, error) {
	if o.retryPolicy == "" {
		return retrypolicy.Set{}, nil
	}
	if o.maxAttemptsSet {
		return retrypolicy.Set{}, fmt.Errorf("--max-attempts cannot be combined with --retry-policy: set max_attempts in %s (under default: for every step, or under a step)", o.retryPolicy)
	}
	return retrypolicy.Load(o.retryPolicy)
}

// workerIdentity is what the worker's HTTP endpoints report: who it is (the incarnation tells one
// launch from the next under the same id), the guard that says whether it holds a usable lease,
// and what else it waits for or lacks (readiness).
type workerIdentity struct {
	workerID, incarnation string
	guard                 *lease.Guard
	ready                 *readiness
}

// serveWorkerHTTP serves /healthz (alive), /readyz (Cassandra usable, a trusted clock, a usable
// lease that its timeouts fit) and /metrics, from the worker's start on.
func serveWorkerHTTP(addr string, id workerIdentity, reg *prometheus.Registry, log zerolog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: workerMux(id, reg), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("worker http server stopped")
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// workerMux routes the worker's HTTP endpoints.
func workerMux(id workerIdentity, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "worker_id": id.workerID, "incarnation": id.incarnation})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		notReady := func(reason string, extra map[string]any) {
			body := map[string]any{"ready": false, "reason": reason, "worker_id": id.workerID, "incarnation": id.incarnation}
			for k, v := range extra {
				body[k] = v
			}
			writeJSON(w, http.StatusServiceUnavailable, body)
		}
		cass, coord, leaseFit, clock := id.ready.snapshot()
		l, leaseErr := id.guard.Check(0)
		// A refusal is not shown beside a usable lease: the coordinators admitted the worker after
		// all (the lease client clears it with its first lease).
		if cass != "" || (leaseErr != nil && coord != "") {
			var reasons []string
			extra := map[string]any{}
			if cass != "" {
				reasons, extra["cassandra"] = append(reasons, cass), cass
			}
			if leaseErr != nil && coord != "" {
				reasons, extra["coordinator"] = append(reasons, coord), coord
			}
			notReady(strings.Join(reasons, "; "), extra)
			return
		}
		if clock == nil || leaseFit == nil {
			notReady("starting", nil)
			return
		}
		if st := clock(); !st.Trusted {
			// Out of the ring on purpose: the reason names the measured offset and the bound.
			extra := map[string]any{"clock_limit_ms": st.Limit.Milliseconds()}
			if st.Measured {
				extra["clock_offset_ms"] = float64(st.Estimate.Offset.Microseconds()) / 1000
				extra["clock_uncertainty_ms"] = float64(st.Estimate.Uncertainty.Microseconds()) / 1000
			}
			notReady(st.Reason, extra)
			return
		}
		// A lease its timeouts do not fit is no readiness either: the guard refuses them for
		// part of every renewal period.
		reason := leaseFit()
		if leaseErr != nil {
			reason = leaseErr.Error()
		}
		if reason != "" {
			notReady(reason, nil)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"ready": true, "worker_id": id.workerID, "incarnation": id.incarnation,
			"epoch": l.Epoch, "node_index": l.NodeIndex, "node_count": l.NodeCount,
			"ranges": lease.EncodeRanges(l.Ranges), "lease_left_ms": l.Remaining(wallclock.Now()).Milliseconds(), // the guard's clock
		})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
