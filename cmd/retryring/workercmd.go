package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
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
}

func newWorkerCommand() *cobra.Command {
	var o workerOptions
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run one retry worker: lease client, traversal, execution and compaction",
		Long: `Run one retry worker. It joins the ring of its service through any coordinator, drains the
part of the retry directory its lease covers, and, while it is Node-0, compacts the directory.
On SIGTERM or SIGINT it stops taking work, lets in-flight executions finish within their timeout
(a partial bucket stays in Cassandra), leaves the ring and exits.`,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			err := bindEnv(cmd, os.LookupEnv)
			o.maxAttemptsSet = flagGiven(cmd, "max-attempts")
			return err
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), o) },
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
	fs.DurationVar(&o.cfg.MaxClockOffset, "max-clock-offset", worker.DefaultMaxClockOffset, "bound on any writer's clock error")
	fs.IntVar(&o.cfg.MaxAttempts, "max-attempts", worker.DefaultMaxAttempts, "executions before a transient failure is dead-lettered (with --retry-policy: max_attempts in the file)")
	fs.StringVar(&o.retryPolicy, "retry-policy", "", "YAML file of per-step retry policies (attempts, max delay, status classes), keyed by stacksaga_impl_type with a default entry")
	fs.BoolVar(&o.cfg.NoBreaker, "no-breaker", false, "turn the circuit breaker off: send every admitted execution however many transient answers came before")
	fs.Float64Var(&o.cfg.MaxRate, "max-rate", 0, "executions per second at most, below this worker's share of the ring's rate limit (0: no cap)")
	fs.DurationVar(&o.cfg.QueryTimeout, "query-timeout", worker.DefaultQueryTimeout, "timeout of each CQL query (the guard demands it)")
	fs.DurationVar(&o.cfg.ExecTimeout, "exec-timeout", worker.DefaultExecTimeout, "timeout of each execution (the guard demands it)")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 10*time.Second, "bound on a graceful shutdown")
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
	parent, err := o.lf.logger(stderr)
	if err != nil {
		return err
	}
	// The lease client and the scanner add their component and the worker id themselves: they get
	// the parent logger, and only the lines of this command are given the worker id here.
	log := parent.With().Str("worker_id", o.workerID).Logger()
	routeRSocketLogs(log)
	ring := o.ring.key()
	policies, err := o.policies()
	if err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Region, cfg.Cluster, cfg.Service, cfg.WorkerID = ring.Region, ring.Cluster, ring.Service, o.workerID
	cfg.WindowMinutes = o.ring.windowMinutes
	cfg.Policies = policies
	cfg.Logger = parent
	if err := cfg.Validate(); err != nil { // before anything connects: a bad flag is said at once
		return err
	}
	token, err := workerTokenFrom(o.tokenFile, os.LookupEnv)
	if err != nil {
		return err
	}
	coordinatorTLS, err := o.tf.config()
	if err != nil {
		return err
	}

	session, err := o.cf.connect(ctx)
	if err != nil {
		return err
	}
	defer session.Close()
	if err := cassandra.CheckSchema(ctx, session, o.cf.keyspace); err != nil {
		return err
	}
	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: o.cf.keyspace, Ring: ring, WindowMinutes: o.ring.windowMinutes})
	if err != nil {
		return err
	}
	exec, err := executor.NewHTTP(executor.HTTPConfig{URL: o.executorURL, Policies: policies})
	if err != nil {
		return err
	}

	var scanner *worker.Scanner // built after the client, whose guard it checks; Drain needs it
	client, err := leaseclient.New(leaseclient.Config{
		WorkerID: o.workerID, Ring: ring, Coordinators: splitList(o.coordinators),
		Token: token, TLS: coordinatorTLS, Logger: parent,
		Drain: func(ctx context.Context, old, next lease.Lease) error {
			return scanner.Drain(ctx, old, next)
		},
		Report: func() lease.Report { return scanner.Report() },
	})
	if err != nil {
		return err
	}
	if scanner, err = worker.New(cfg, store, client.Guard(), exec); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(worker.NewMetrics(scanner), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stopHTTP, err := serveWorkerHTTP(o.httpAddr, workerIdentity{o.workerID, client.Incarnation(), client.Guard(), scanner.LeaseFit}, reg, log)
	if err != nil {
		return err
	}
	defer stopHTTP()

	// The lease client outlives the scanner: it must still hold the lease while in-flight work ends.
	clientCtx, stopClient := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClient()
	clientDone := make(chan error, 1)
	go func() { clientDone <- client.Run(clientCtx) }()
	log.Info().Str("incarnation", client.Incarnation()).Str("ring", ring.String()).Msg("worker started")

	runErr := scanner.Run(ctx) // returns when ctx ends (signal), after in-flight work settled
	log.Info().Msg("stopping: leaving the ring")
	leaveCtx, cancel := context.WithTimeout(context.Background(), o.shutdown)
	defer cancel()
	if err := client.Leave(leaveCtx); err != nil {
		log.Warn().Err(err).Msg("leave failed; the coordinator frees the ranges when the lease expires")
	}
	stopClient()
	if err := <-clientDone; err != nil && !errors.Is(err, context.Canceled) {
		log.Warn().Err(err).Msg("lease client ended with an error")
	}
	s := scanner.Stats()
	log.Info().Interface("stats", s).Msg("worker stopped")
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
// and whether its timeouts fit that lease ("" when they do).
type workerIdentity struct {
	workerID, incarnation string
	guard                 *lease.Guard
	leaseFit              func() string
}

// serveWorkerHTTP serves /healthz (alive), /readyz (a usable lease that its timeouts fit is held)
// and /metrics.
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
		l, err := id.guard.Check(0)
		// A lease its timeouts do not fit is no readiness either: the guard refuses them for
		// part of every renewal period.
		reason := id.leaseFit()
		if err != nil {
			reason = err.Error()
		}
		if reason != "" {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{
				"ready": false, "reason": reason, "worker_id": id.workerID, "incarnation": id.incarnation,
			})
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
