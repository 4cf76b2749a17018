package proc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/lease"
)

// Defaults of Options.
const (
	DefaultCoordinators  = 3
	DefaultWorkers       = 3
	DefaultCassandra     = "127.0.0.1:9042"
	DefaultConcurrency   = 8
	DefaultWindowMinutes = 1
	// DefaultWait bounds NewCluster's start: launches, leader election, readiness. Generous: a
	// 2-core machine running Cassandra and seven Go processes is slow to start them all.
	DefaultWait = 60 * time.Second
	// DefaultTermWait bounds a graceful stop before Term kills.
	DefaultTermWait = 30 * time.Second
	// portAttempts is how many times a launch that lost a port race is retried on fresh ports.
	portAttempts = 3
)

// DefaultRing is the ring of a Cluster unless Options name another.
var DefaultRing = lease.RingKey{Region: "e2e", Cluster: "c1", Service: "orders"}

// Options configures a Cluster. Zero values mean the defaults.
type Options struct {
	// Binary is the retryring binary. Required.
	Binary string
	// Coordinators is the number of coordinator voters. Default 3.
	Coordinators int
	// Workers is the number of workers StartCluster starts (w1, w2, ...). Default 3; -1 for none.
	Workers int
	// Cassandra is host:port of Cassandra. Default 127.0.0.1:9042.
	Cassandra string
	// Keyspace is the keyspace of the retry directory. Required when there are workers or
	// records; StartCluster applies the schema to it (idempotent) unless SkipSchema.
	Keyspace   string
	SkipSchema bool
	// Replication is `schema apply --replication` ("3", "dc1=3,dc2=3"). Default: the binary's (1).
	Replication string
	// Ring is the ring of every worker and record. Default DefaultRing.
	Ring lease.RingKey
	// WindowMinutes is L for workers and records. Default 1.
	WindowMinutes int
	// LookbackDays is passed to workers when not 0.
	LookbackDays int
	// Concurrency is the workers' --concurrency. Default 8.
	Concurrency int
	// LeaseTTL and LeaseRenewal are passed to coordinators when not 0.
	LeaseTTL     time.Duration
	LeaseRenewal time.Duration
	// LogLevel is passed to coordinators and workers as --log-level when not "".
	LogLevel string
	// AdminTLS, when set, is the client configuration of the coordinators' admin ports, which
	// then speak TLS (their --tls-cert is among CoordinatorArgs): every poll goes over https.
	AdminTLS *tls.Config
	// CoordinatorArgs and WorkerArgs are appended to every coordinator's and worker's flags.
	CoordinatorArgs []string
	WorkerArgs      []string
	// WorkerEnv adds environment variables ("K=V") to the workers named by its keys ("w2").
	WorkerEnv map[string][]string
	// Downstream configures the stub the workers execute against.
	Downstream downstream.Config
	// ViewTimeout bounds each coordinator's answer when Leader asks them all, so that one slow to
	// answer (just relaunched, or overloaded) does not hold a tight poll up. Default: none beyond
	// the context and the admin client's own bound.
	ViewTimeout time.Duration
	// Wait bounds NewCluster's start. Default DefaultWait.
	Wait time.Duration
}

func (o Options) withDefaults() Options {
	if o.Coordinators == 0 {
		o.Coordinators = DefaultCoordinators
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Workers < 0 {
		o.Workers = 0
	}
	if o.Cassandra == "" {
		o.Cassandra = DefaultCassandra
	}
	if o.Ring == (lease.RingKey{}) {
		o.Ring = DefaultRing
	}
	if o.WindowMinutes == 0 {
		o.WindowMinutes = DefaultWindowMinutes
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	return o
}

// Cluster is N coordinators, M workers of one ring and a downstream stub, as processes (the stub
// in this process) of one Group.
type Cluster struct {
	opts Options
	// Group holds every process; its directory holds the logs and the coordinators' data.
	Group      *Group
	Downstream *downstream.Server

	mu           sync.Mutex
	coordinators []*Coordinator
	workers      []*Worker
	nextWorker   int
	records      int
}

// StartCluster starts the stub, applies the schema, launches the coordinators into g and waits
// for a leader and for every coordinator to be ready, then launches the workers and waits until
// each answers /healthz, all within ctx. On an error the stub is closed and what was launched is
// left in g, whose Close kills it (a test prints the logs first).
func StartCluster(ctx context.Context, g *Group, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if opts.Binary == "" {
		return nil, errors.New("proc: Options.Binary is required")
	}
	ds, err := downstream.Start(opts.Downstream)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, Group: g, Downstream: ds}
	if err := c.start(ctx); err != nil {
		_ = ds.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	if c.opts.Keyspace != "" && !c.opts.SkipSchema {
		if err := c.ApplySchema(ctx); err != nil {
			return err
		}
	}
	if err := c.startCoordinators(ctx); err != nil {
		return err
	}
	_, err := c.AddWorkers(ctx, c.opts.Workers)
	return err
}

// Close kills every process of the group (the cluster's and any other launched into it) and
// waits until each was reaped, then closes the stub: a worker that lost its executor while still
// running would record transient failures for nothing.
func (c *Cluster) Close() error {
	err := c.Group.Close()
	return errors.Join(err, c.Downstream.Close())
}

// Stop ends every worker, then every coordinator, gracefully: SIGTERM, each bounded by wait and
// killed after it. Workers go first so that they can leave the ring through the coordinators.
func (c *Cluster) Stop(wait time.Duration) error {
	var ws, cs []*Process
	for _, w := range c.Workers() {
		ws = append(ws, w.Process)
	}
	for _, co := range c.Coordinators() {
		cs = append(cs, co.Process)
	}
	return errors.Join(termAll(ws, wait), termAll(cs, wait))
}

// termAll terms every running process of ps at once and waits for them all.
func termAll(ps []*Process, wait time.Duration) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if !p.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Term(wait)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Options returns the cluster's options with defaults filled in.
func (c *Cluster) Options() Options { return c.opts }

// Coordinators returns every coordinator (running or not), c1 first.
func (c *Cluster) Coordinators() []*Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Coordinator(nil), c.coordinators...)
}

// Workers returns every worker (running or not), in the order they were added.
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Worker(nil), c.workers...)
}

// Worker returns the worker with id, or nil.
func (c *Cluster) Worker(id string) *Worker {
	for _, w := range c.Workers() {
		if w.ID == id {
			return w
		}
	}
	return nil
}

func (c *Cluster) startCoordinators(ctx context.Context) error {
	var err error
	for range portAttempts {
		if err = c.launchCoordinators(ctx); !errors.Is(err, ErrPortInUse) {
			return err
		}
		for _, co := range c.Coordinators() {
			_ = co.Kill9()
			_ = os.RemoveAll(co.DataDir)
		}
	}
	return err
}

// launchCoordinators launches every coordinator on fresh ports with one --peers list, waits until
// each answers /healthz, a leader is known and every one is ready (has applied the leader's log).
func (c *Cluster) launchCoordinators(ctx context.Context) error {
	n := c.opts.Coordinators
	if c.opts.AdminTLS != nil {
		setAdminTLS(c.opts.AdminTLS)
	}
	cos := make([]*Coordinator, n)
	peers := make([]string, n)
	dataRoot := filepath.Join(c.Group.Dir(), "data")
	if err := os.MkdirAll(dataRoot, 0o755); err != nil {
		return fmt.Errorf("proc: data dir: %w", err)
	}
	for i := range cos {
		co := &Coordinator{ID: "c" + strconv.Itoa(i+1), https: c.opts.AdminTLS != nil}
		for _, addr := range []*string{&co.RaftAddr, &co.RSocketAddr, &co.HTTPAddr} {
			a, err := FreeAddr()
			if err != nil {
				return err
			}
			*addr = a
		}
		// A directory of its own per launch: a node must not find the Raft state of another
		// configuration (an earlier attempt, or an earlier run in a log directory given again).
		dir, err := os.MkdirTemp(dataRoot, co.ID+"-")
		if err != nil {
			return fmt.Errorf("proc: data dir: %w", err)
		}
		co.DataDir = dir
		cos[i] = co
		peers[i] = co.ID + "=" + co.RaftAddr
	}
	for _, co := range cos {
		args := co.Args(peers)
		if c.opts.LeaseTTL > 0 {
			args = append(args, "--lease-ttl", c.opts.LeaseTTL.String())
		}
		if c.opts.LeaseRenewal > 0 {
			args = append(args, "--lease-renewal", c.opts.LeaseRenewal.String())
		}
		if c.opts.LogLevel != "" {
			args = append(args, "--log-level", c.opts.LogLevel)
		}
		args = append(args, c.opts.CoordinatorArgs...)
		p, err := c.Group.Launch(Spec{Name: co.ID, Path: c.opts.Binary, Args: args})
		if err != nil {
			return err
		}
		co.Process = p
	}
	// Known once every one was launched: a coordinator is never listed without its process.
	c.mu.Lock()
	c.coordinators = cos
	c.mu.Unlock()
	for _, co := range cos {
		if err := co.WaitHealthy(ctx); err != nil {
			return err
		}
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		return err
	}
	for _, co := range cos {
		if err := co.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RSocketAddrs lists every coordinator's RSocket address, comma-separated: what a worker (or
// any other lease client) is given to find the ring.
func (c *Cluster) RSocketAddrs() string {
	var out []string
	for _, co := range c.Coordinators() {
		out = append(out, co.RSocketAddr)
	}
	return strings.Join(out, ",")
}

// cassandraArgs are the flags naming the retry directory and the ring.
func (c *Cluster) cassandraArgs() []string {
	o := c.opts
	return []string{
		"--cassandra", o.Cassandra, "--keyspace", o.Keyspace,
		"--region", o.Ring.Region, "--cluster", o.Ring.Cluster, "--service", o.Ring.Service,
		"--window-minutes", strconv.Itoa(o.WindowMinutes),
	}
}

func (c *Cluster) workerArgs(id, httpAddr string) []string {
	o := c.opts
	args := append([]string{"worker", "--worker-id", id, "--coordinators", c.RSocketAddrs()}, c.cassandraArgs()...)
	args = append(args, "--executor-url", c.Downstream.URL(), "--concurrency", strconv.Itoa(o.Concurrency),
		"--http-addr", httpAddr)
	if o.LookbackDays != 0 {
		args = append(args, "--lookback-days", strconv.Itoa(o.LookbackDays))
	}
	if o.LogLevel != "" {
		args = append(args, "--log-level", o.LogLevel)
	}
	return append(args, o.WorkerArgs...)
}

// AddWorker starts the next worker (w1, w2, ...) and waits until it answers /healthz.
func (c *Cluster) AddWorker(ctx context.Context) (*Worker, error) {
	ws, err := c.AddWorkers(ctx, 1)
	if err != nil {
		return nil, err
	}
	return ws[0], nil
}

// AddWorkers launches the next n workers all at once, then waits until each answers /healthz.
func (c *Cluster) AddWorkers(ctx context.Context, n int) ([]*Worker, error) {
	ws := make([]*Worker, 0, n)
	for range n {
		c.mu.Lock()
		c.nextWorker++
		id := "w" + strconv.Itoa(c.nextWorker)
		c.mu.Unlock()
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		p, err := c.Group.Launch(Spec{Name: id, Path: c.opts.Binary, Args: c.workerArgs(id, addr), Env: c.opts.WorkerEnv[id]})
		if err != nil {
			return nil, err
		}
		w := &Worker{Process: p, ID: id, HTTPAddr: addr}
		c.mu.Lock()
		c.workers = append(c.workers, w)
		c.mu.Unlock()
		ws = append(ws, w)
	}
	for _, w := range ws {
		if err := c.WaitWorker(ctx, w); err != nil {
			return nil, err
		}
	}
	return ws, nil
}

// WaitWorker waits until a worker just launched (or launched again) answers /healthz, launching
// it again on a fresh port when its port was taken.
func (c *Cluster) WaitWorker(ctx context.Context, w *Worker) error {
	for attempt := 1; ; attempt++ {
		err := w.WaitHealthy(ctx)
		if !errors.Is(err, ErrPortInUse) || attempt == portAttempts {
			return err
		}
		addr, aerr := FreeAddr()
		if aerr != nil {
			return aerr
		}
		w.HTTPAddr = addr
		w.SetArgs(c.workerArgs(w.ID, addr))
		if err := w.Restart(); err != nil {
			return err
		}
	}
}

// RestartWorker launches an exited worker again (same id and flags: a new incarnation) and waits
// for /healthz.
func (c *Cluster) RestartWorker(ctx context.Context, w *Worker) error {
	if err := w.Restart(); err != nil {
		return err
	}
	return c.WaitWorker(ctx, w)
}

// RestartCoordinator launches an exited coordinator again on its ports and data directory, and
// waits for /healthz.
func (c *Cluster) RestartCoordinator(ctx context.Context, co *Coordinator) error {
	if err := co.Restart(); err != nil {
		return err
	}
	return co.WaitHealthy(ctx)
}

// Leader asks every running, not stopped coordinator for its view (each answer bounded by
// Options.ViewTimeout) and returns the one that reports itself as leader (the highest Raft term if
// two do, as a deposed leader may for a moment), with its view.
func (c *Cluster) Leader(ctx context.Context) (*Coordinator, admin.RingView, error) {
	var best *Coordinator
	var bestView admin.RingView
	var errs []error
	for _, co := range c.Coordinators() {
		if !co.Running() || co.Stopped() {
			continue
		}
		v, err := c.view(ctx, co)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", co.ID, err))
			continue
		}
		if v.LeaderID == co.ID && v.CoordinatorID == co.ID && (best == nil || v.RaftTerm > bestView.RaftTerm) {
			best, bestView = co, v
		}
	}
	if best == nil {
		return nil, admin.RingView{}, fmt.Errorf("%w: %w", ErrNoLeader, errors.Join(errs...))
	}
	return best, bestView, nil
}

func (c *Cluster) view(ctx context.Context, co *Coordinator) (admin.RingView, error) {
	if c.opts.ViewTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.ViewTimeout)
		defer cancel()
	}
	return co.View(ctx)
}

// WaitLeader polls until a coordinator reports itself as leader, or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context) (*Coordinator, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		co, _, err := c.Leader(ctx)
		if err == nil {
			return co, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// RingOf returns this cluster's ring in a view, if the view has it.
func (c *Cluster) RingOf(v admin.RingView) (admin.RingStateView, bool) {
	return v.Ring(c.opts.Ring)
}

// Settled reports whether the ring in v is at rest with exactly the members workers (worker id →
// incarnation, "" for any incarnation): admin.RingStateView.AtRest. It returns why not.
func (c *Cluster) Settled(v admin.RingView, workers map[string]string) (bool, string) {
	r, ok := c.RingOf(v)
	if !ok {
		return false, "ring not in the view"
	}
	if err := r.AtRest(workers); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// WaitSettled waits until the leader's view shows the ring settled with exactly the running
// workers, each in the incarnation of its current launch, and returns that view.
func (c *Cluster) WaitSettled(ctx context.Context) (admin.RingView, error) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	why := ""
	for {
		want := map[string]string{}
		known := true
		for _, w := range c.Workers() {
			if w.Running() {
				inc := w.Incarnation()
				known = known && inc != ""
				want[w.ID] = inc
			}
		}
		if !known {
			why = "a worker has not logged its incarnation yet"
		} else if _, v, err := c.Leader(ctx); err != nil {
			why = err.Error()
		} else if ok, reason := c.Settled(v, want); ok {
			return v, nil
		} else {
			why = reason
		}
		select {
		case <-ctx.Done():
			return admin.RingView{}, fmt.Errorf("proc: ring not settled (%s): %w", why, ctx.Err())
		case <-t.C:
		}
	}
}

// ApplySchema runs `retryring schema apply` for the cluster's keyspace, with its Replication.
func (c *Cluster) ApplySchema(ctx context.Context) error {
	args := []string{"schema", "apply", "--cassandra", c.opts.Cassandra, "--keyspace", c.opts.Keyspace}
	if c.opts.Replication != "" {
		args = append(args, "--replication", c.opts.Replication)
	}
	_, err := c.Group.Run(ctx, Spec{Name: "schema", Path: c.opts.Binary, Args: args})
	return err
}

// RecordOptions are the flags of one `retryring record` run.
type RecordOptions struct {
	// Count failures in all, over Instances instances (default 3).
	Count     int
	Instances int
	// Rate per second in all; 0 as fast as possible.
	Rate float64
	// Backdate writes into the window after the one the clock showed this long ago (readable at
	// once); 0 writes into W+1 in real time.
	Backdate time.Duration
	// Prefix of the transaction ids (ids are Prefix0 .. Prefix<Count-1>). Default: unique per run.
	Prefix string
	// Concurrency of the writes; 0 the binary's default.
	Concurrency int
	// BucketSize; 0 the binary's default.
	BucketSize int
	// Env adds environment variables ("K=V") to the run.
	Env []string
}

// Batch is what one record run wrote.
type Batch struct {
	Prefix string
	Count  int
	// Output is the tool's output ("imported N failures into window ...").
	Output string
	// Started and Finished bracket the run.
	Started, Finished time.Time
}

// IDs are the transaction ids of the batch.
func (b Batch) IDs() []string {
	out := make([]string, b.Count)
	for i := range out {
		out[i] = b.Prefix + strconv.Itoa(i)
	}
	return out
}

// Record runs `retryring record` to its end and returns what it wrote.
func (c *Cluster) Record(ctx context.Context, o RecordOptions) (Batch, error) {
	c.mu.Lock()
	c.records++
	n := c.records
	c.mu.Unlock()
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("tx-%s-r%d-", c.opts.Ring.Service, n)
	}
	if o.Instances == 0 {
		o.Instances = 3
	}
	args := append([]string{"record"}, c.cassandraArgs()...)
	args = append(args, "--count", strconv.Itoa(o.Count), "--instances", strconv.Itoa(o.Instances),
		"--tx-prefix", o.Prefix)
	if o.Rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(o.Rate, 'f', -1, 64))
	}
	if o.Backdate > 0 {
		args = append(args, "--backdate", o.Backdate.String())
	}
	if o.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	}
	if o.BucketSize > 0 {
		args = append(args, "--bucket-size", strconv.Itoa(o.BucketSize))
	}
	b := Batch{Prefix: o.Prefix, Count: o.Count, Started: time.Now()}
	out, err := c.Group.Run(ctx, Spec{Name: fmt.Sprintf("record-%d", n), Path: c.opts.Binary, Args: args, Env: o.Env})
	b.Output, b.Finished = strings.TrimSpace(out), time.Now()
	return b, err
}
