package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/leaseclient"
)

// options are the example's flags. Each also reads RETRYRING_<FLAG> (--instance-id ↔
// RETRYRING_INSTANCE_ID), like the retryring binary's.
type options struct {
	cassandra     string
	keyspace      string
	applySchema   bool
	coordinators  string
	region        string
	cluster       string
	service       string
	instanceID    string
	windowMinutes int
	orders        int
	orderEvery    time.Duration
	outage        time.Duration
	concurrency   int
	stats         time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("embedded", flag.ContinueOnError)
	host, _ := os.Hostname()
	fs.StringVar(&o.cassandra, "cassandra", cassandra.DefaultHost, "Cassandra contact points, host:port,...")
	fs.StringVar(&o.keyspace, "keyspace", "retryring", "keyspace of the retry directory")
	fs.BoolVar(&o.applySchema, "apply-schema", false, "create the keyspace and tables first (idempotent)")
	fs.StringVar(&o.coordinators, "coordinators", "127.0.0.1:7878", "RSocket addresses of the coordinators, host:port,...")
	fs.StringVar(&o.region, "region", "local", "region of the service")
	fs.StringVar(&o.cluster, "cluster", "default", "cluster of the service")
	fs.StringVar(&o.service, "service", "payments", "this service's name: its ring and its rows")
	fs.StringVar(&o.instanceID, "instance-id", "payments-"+host, "this instance's id: the pod name; also its worker id in the ring")
	fs.IntVar(&o.windowMinutes, "window-minutes", 1, "window length L in minutes (the same for every instance of the service)")
	fs.IntVar(&o.orders, "orders", 200, "orders to take, one every --order-every; 0: none (a pure retry worker)")
	fs.DurationVar(&o.orderEvery, "order-every", 50*time.Millisecond, "pause between orders")
	fs.DurationVar(&o.outage, "outage", 20*time.Second, "how long the payment gateway is down after the start")
	fs.IntVar(&o.concurrency, "concurrency", 16, "retries in flight at most")
	fs.DurationVar(&o.stats, "stats-every", 5*time.Second, "how often to print the counters")
	// The environment sets the defaults; the command line overrides them.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "RETRYRING_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, env)
		if v, ok := os.LookupEnv(env); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("environment %s=%q: %w", env, v, err)
			}
		}
	})
	if envErr != nil {
		return o, envErr
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.instanceID == "" || o.orders < 0 || o.concurrency < 1 {
		return o, errors.New("--instance-id must not be empty, --orders not negative, --concurrency at least 1")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

// run is the service: it takes orders, charges each through the gateway, records the charges
// that failed for a passing reason, and retries recorded charges (its own and other
// instances') whose tokens the coordinator leases to it.
func run(ctx context.Context, o options) error {
	// The recorder, the lease client and the scanner add their component and this instance's id
	// themselves: they get the parent logger, the service's own lines get the id here.
	parent := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}).With().Timestamp().Logger()
	log := parent.With().Str("instance_id", o.instanceID).Logger()
	ring := lease.RingKey{Region: o.region, Cluster: o.cluster, Service: o.service}

	session, err := cassandra.Connect(ctx, cassandra.Config{Hosts: split(o.cassandra), Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer session.Close()
	if o.applySchema {
		if err := cassandra.ApplySchema(ctx, session, o.keyspace, cassandra.Replication{Factor: 1}); err != nil {
			return err
		}
	}
	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: o.keyspace, Ring: ring, WindowMinutes: o.windowMinutes})
	if err != nil {
		return err
	}

	gateway := newGateway(time.Now().Add(o.outage))

	// The clock check: the recorder and the scanner work only while this host's clock is within
	// half of max_clock_offset from Cassandra's. Measure before recording anything: a row stamped
	// by a clock beyond the bound could be hidden by a worker's delete, and the failure lost.
	clock, err := clockcheck.NewMonitor(clockcheck.Config{Prober: clockcheck.NewCassandraProber(session, nil), Logger: parent})
	if err != nil {
		return err
	}
	if err := clock.Measure(ctx); err != nil {
		return fmt.Errorf("measuring the clock offset from Cassandra: %w", err)
	}
	if err := clock.Status().Err(); err != nil {
		return fmt.Errorf("%w (fix this host's time sync before it records failures)", err)
	}
	clockCtx, stopClock := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClock()
	go func() { _ = clock.Run(clockCtx) }()

	// The regular-node side: the recorder writes a failure into W+1 (docs/schema.md).
	rec, err := recorder.New(store, recorder.Config{InstanceID: o.instanceID, ClockCheck: clock, Logger: &parent})
	if err != nil {
		return err
	}

	// The retry-worker side: the lease client keeps this instance's lease in a guard, and the
	// scanner executes what it finds in the leased tokens with our Executor, in process.
	var scanner *worker.Scanner // built after the client, whose guard it checks; Drain needs it
	client, err := leaseclient.New(leaseclient.Config{
		WorkerID: o.instanceID, Ring: ring, Coordinators: split(o.coordinators),
		Logger: parent,
		Drain: func(ctx context.Context, old, next lease.Lease) error {
			return scanner.Drain(ctx, old, next)
		},
		Report: func() lease.Report { return scanner.Report() }, // what the operator sees of us
	})
	if err != nil {
		return err
	}
	scanner, err = worker.New(worker.Config{
		Region: ring.Region, Cluster: ring.Cluster, Service: ring.Service, WorkerID: o.instanceID,
		WindowMinutes: o.windowMinutes, Concurrency: o.concurrency, ClockCheck: clock,
		Logger: parent,
	}, store, client.Guard(), chargeExecutor{gateway})
	if err != nil {
		return err
	}

	// The lease client outlives the scanner: the lease must hold while in-flight retries end.
	clientCtx, stopClient := context.WithCancel(context.WithoutCancel(ctx))
	defer stopClient()
	clientDone := make(chan error, 1)
	go func() { clientDone <- client.Run(clientCtx) }()
	scannerDone := make(chan error, 1)
	go func() { scannerDone <- scanner.Run(ctx) }()
	go printStats(ctx, o.stats, log, scanner, rec, gateway)
	log.Info().Str("ring", ring.String()).Str("incarnation", client.Incarnation()).
		Time("gateway_back_at", gateway.backAt).Msg("service started: taking orders, retrying failed charges")

	takeOrders(ctx, o, log, gateway, rec)

	<-ctx.Done()
	log.Info().Msg("stopping: in-flight retries finish, then the instance leaves the ring")
	if err := <-scannerDone; err != nil {
		log.Warn().Err(err).Msg("scanner")
	}
	leaveCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Leave(leaveCtx); err != nil {
		log.Warn().Err(err).Msg("leave failed; the coordinator frees the ranges when the lease expires")
	}
	stopClient()
	if err := <-clientDone; err != nil && !errors.Is(err, context.Canceled) {
		log.Warn().Err(err).Msg("lease client")
	}
	log.Info().Interface("worker", scanner.Stats()).Interface("recorder", rec.Stats()).Msg("stopped")
	return nil
}

// takeOrders is the service's own work: each order charges the customer; a charge that fails
// for a passing reason is recorded, so that a retry worker (this instance or another) charges
// it later, exactly once.
func takeOrders(ctx context.Context, o options, log zerolog.Logger, gw *gateway, rec *recorder.Recorder) {
	t := time.NewTicker(o.orderEvery)
	defer t.Stop()
	for i := 0; i < o.orders; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		orderID := fmt.Sprintf("%s-order-%d", o.instanceID, i)
		err := gw.Charge(ctx, orderID)
		if err == nil || !errors.Is(err, errUnavailable) {
			continue // charged, or refused for good (the saga would compensate: not a retry)
		}
		where, err := rec.Record(ctx, recorder.Failure{TransactionID: orderID, ImplType: "ChargePayment", AllocationKey: strconv.Itoa(i % 16)})
		if err != nil {
			// Not recorded: the caller must know (here: the order is reported failed).
			log.Error().Err(err).Str("order_id", orderID).Msg("charge failed and could not be recorded")
			continue
		}
		log.Debug().Str("order_id", orderID).Stringer("window", where.Window).Msg("charge failed; recorded for retry")
	}
	log.Info().Int("orders", o.orders).Msg("all orders taken; retries continue until Ctrl-C")
}

// printStats prints the counters every period.
func printStats(ctx context.Context, every time.Duration, log zerolog.Logger, sc *worker.Scanner, rec *recorder.Recorder, gw *gateway) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w, r := sc.Stats(), rec.Stats()
		log.Info().Uint64("recorded", r.Failures).Uint64("retried_done", w.Done).Uint64("retried_transient", w.Transient).
			Uint64("dead_lettered", w.DeadLettered).Int("charged", gw.Charged()).Int("charged_twice", gw.ChargedTwice()).
			Msg("progress")
	}
}

// split reads a comma-separated flag as the binary's internal/flaglist.Split does. It is a copy
// on purpose: this program is written to be copied into a service outside this module, which can
// import retryring's public packages only, never its internal ones.
func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
