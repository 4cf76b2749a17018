package ringtest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/ringtest/faultproxy"
)

// Defaults of Options.
const (
	DefaultCoordinators = 3
	// DefaultTTL and DefaultRenewal are shorter than the product's defaults so that expiries,
	// which gate every takeover after a crash or a cut, do not dominate test time.
	DefaultTTL     = 2 * time.Second
	DefaultRenewal = 400 * time.Millisecond
	// DefaultWait bounds every wait of the harness that is not given its own bound.
	DefaultWait = 20 * time.Second
	// DefaultBackoffMax caps the workers' reconnect delay: a worker cut off for long must come back
	// soon after Heal.
	DefaultBackoffMax = time.Second
)

// DefaultRing is the ring the workers join unless Options name another.
var DefaultRing = lease.RingKey{Region: "test", Cluster: "c1", Service: "orders"}

// Options configures a Cluster. Zero values mean the defaults.
type Options struct {
	// Coordinators is the number of voters. Default 3.
	Coordinators int
	// Ring is the ring every worker joins. Default DefaultRing.
	Ring lease.RingKey
	// Timing is the coordinators' lease timing. Zero TTL and Renewal mean DefaultTTL and
	// DefaultRenewal; the rest default as in lease.Timing.
	Timing lease.Timing
	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, SilenceTimeout and ReconnectGrace are
	// passed to every coordinator (zero: the coordinator's defaults).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	SilenceTimeout     time.Duration
	ReconnectGrace     time.Duration
	// KeepaliveLifetime is the workers' tolerance of silence (zero: the lease client's default).
	KeepaliveLifetime time.Duration
	// BackoffMax caps the workers' reconnect delay. Default DefaultBackoffMax.
	BackoffMax time.Duration
	// Wait bounds the harness's waits (Leader, start, stop). Default DefaultWait.
	Wait time.Duration
	// LogLevel is the level (a zerolog level name) of the components' logs, kept in memory and
	// printed when the test fails. Default "info"; the environment variable RINGTEST_LOG overrides it.
	LogLevel string
}

func (o Options) withDefaults() Options {
	if o.Coordinators == 0 {
		o.Coordinators = DefaultCoordinators
	}
	if o.Ring == (lease.RingKey{}) {
		o.Ring = DefaultRing
	}
	if o.Timing.TTL == 0 {
		o.Timing.TTL = DefaultTTL
	}
	if o.Timing.Renewal == 0 {
		o.Timing.Renewal = DefaultRenewal
	}
	o.Timing = o.Timing.WithDefaults()
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	return o
}

// Cluster is N coordinators and any number of workers in this process, every party behind its own
// fault proxy, with the history of every lease the workers held.
type Cluster struct {
	t    testing.TB
	opts Options
	rec  *Recorder
	logs *logBuffer
	log  zerolog.Logger
	dir  string
	// baseline are the goroutines that ran before the cluster started.
	baseline map[string]string
	// watchStop ends watch; watchDone is closed when it has.
	watchStop, watchDone chan struct{}
	// noted is the last ring generation watch noted.
	noted atomic.Uint64

	coords []*Coordinator

	mu      sync.Mutex
	workers []*Worker
	byConn  map[string]*faultproxy.Proxy // holder -> its network, for the classifier
	closed  bool
	// leader is the leader watch saw last, first seen at leaderSince.
	leader      *Coordinator
	leaderSince time.Duration
}

// NewCluster starts the coordinators, waits until one leads and every running node knows its
// address, and registers Close with t.Cleanup.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults()
	logs := newLogBuffer(2000)
	c := &Cluster{
		t: t, opts: opts, rec: NewRecorder(nil), logs: logs, baseline: goroutines(),
		log:    zerolog.New(logs).Level(logLevel(opts.LogLevel)).With().Timestamp().Logger(),
		dir:    t.TempDir(),
		byConn: map[string]*faultproxy.Proxy{},
	}
	routeRSocketLogs(c.log)
	t.Cleanup(c.Close)
	peers := make([]coordinator.Peer, opts.Coordinators)
	for i := range opts.Coordinators {
		co, err := c.newCoordinator(i)
		if err != nil {
			t.Fatalf("ringtest: coordinator %d: %v", i, err)
		}
		c.coords = append(c.coords, co)
		peers[i] = coordinator.Peer{ID: co.ID, RaftAddr: co.raftProxy.Addr()}
	}
	for _, co := range c.coords {
		co.peers = peers
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.coords))
	for i, co := range c.coords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = co.start()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ringtest: starting coordinator %d: %v", i, err)
		}
	}
	c.WaitReady(opts.Wait)
	c.watchDone = make(chan struct{})
	c.watchStop = make(chan struct{})
	go c.watch()
	return c
}

// watchInterval is how often the harness reads the leader's view of the ring.
const watchInterval = 20 * time.Millisecond

// watch notes every change of leader and every change of the ring's generation (a membership
// change) that the leader's committed state shows. A generation change is a fault: the ring owes
// coverage only while its membership stands still, and a membership change the test did not cause
// (a worker dropped by a slow machine, say) must not be reported as a gap.
func (c *Cluster) watch() {
	defer close(c.watchDone)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	var leader string
	for {
		select {
		case <-c.watchStop:
			return
		case <-t.C:
		}
		l, err := c.WaitLeader(0)
		if err != nil {
			continue
		}
		if l.ID != leader {
			leader = l.ID
			at := c.rec.Note(Event{Kind: EventLeader, Coordinator: l.ID})
			c.mu.Lock()
			c.leader, c.leaderSince = l, at
			c.mu.Unlock()
		}
		if r, ok := l.View().Ring(c.opts.Ring); ok && r.Generation != c.noted.Load() {
			c.rec.Note(Event{Kind: EventGeneration, Coordinator: l.ID, Epoch: r.Generation, Fault: true})
			c.noted.Store(r.Generation)
		}
	}
}

// Options returns the options in effect, defaults filled.
func (c *Cluster) Options() Options { return c.opts }

// Recorder is the history of the cluster.
func (c *Cluster) Recorder() *Recorder { return c.rec }

// Now is the current instant of the history's clock.
func (c *Cluster) Now() time.Duration { return c.rec.Now() }

// Logger is the cluster's logger: tests may log through it into the same buffer.
func (c *Cluster) Logger() zerolog.Logger { return c.log }

// Coordinators returns every coordinator, in index order.
func (c *Cluster) Coordinators() []*Coordinator { return c.coords }

// Coordinator returns coordinator i.
func (c *Cluster) Coordinator(i int) *Coordinator { return c.coords[i] }

// RSocketAddrs are the addresses workers are given: every coordinator's RSocket front proxy.
func (c *Cluster) RSocketAddrs() []string {
	out := make([]string, len(c.coords))
	for i, co := range c.coords {
		out[i] = co.rsocketProxy.Addr()
	}
	return out
}

// Leader waits (bounded by Options.Wait) until exactly one running coordinator whose network is
// not hung or cut leads, and returns it. A partitioned node that still believes it leads is not
// counted: it cannot commit or renew anything.
func (c *Cluster) Leader() *Coordinator {
	c.t.Helper()
	l, err := c.WaitLeader(c.opts.Wait)
	if err != nil {
		c.t.Fatalf("ringtest: %v", err)
	}
	return l
}

// WaitLeader is Leader with an explicit bound and an error instead of a test failure.
func (c *Cluster) WaitLeader(timeout time.Duration) (*Coordinator, error) {
	var leader *Coordinator
	err := poll(timeout, func() bool {
		leader = nil
		for _, co := range c.coords {
			if !co.Faulted() && co.IsLeader() {
				if leader != nil {
					return false // an old leader that has not noticed yet
				}
				leader = co
			}
		}
		return leader != nil
	})
	if err != nil {
		return nil, fmt.Errorf("no single leader within %v", timeout)
	}
	return leader, nil
}

// WaitReady waits until one coordinator leads and every running, reachable coordinator knows the
// leader's RSocket address (so that a worker sent to a follower is redirected, not refused).
func (c *Cluster) WaitReady(timeout time.Duration) *Coordinator {
	c.t.Helper()
	var leader *Coordinator
	err := poll(timeout, func() bool {
		l, err := c.WaitLeader(0)
		if err != nil {
			return false
		}
		for _, co := range c.coords {
			if !co.Running() || co.Faulted() {
				continue
			}
			if id, addr := co.node().Leader(); id != l.ID || addr == "" {
				return false
			}
		}
		leader = l
		return true
	})
	if err != nil {
		c.t.Fatalf("ringtest: cluster not ready within %v", timeout)
	}
	return leader
}

// KillLeader kills the current leader abruptly and returns it.
func (c *Cluster) KillLeader() *Coordinator {
	c.t.Helper()
	l := c.Leader()
	l.Kill()
	return l
}

// Kill kills coordinator i abruptly.
func (c *Cluster) Kill(i int) { c.coords[i].Kill() }

// Restart starts coordinator i again on its data directory, behind the same proxies.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.coords[i].Restart(); err != nil {
		c.t.Fatalf("ringtest: restarting coordinator %d: %v", i, err)
	}
}

// AddWorker starts a worker with a fresh incarnation, connecting to any coordinator.
func (c *Cluster) AddWorker(id string) *Worker {
	c.t.Helper()
	return c.StartWorker(WorkerOptions{ID: id})
}

// Workers returns every worker handle started so far (including stopped ones), in start order.
func (c *Cluster) Workers() []*Worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Worker(nil), c.workers...)
}

// ActiveWorkers are the workers expected to hold ranges once the ring settles: running, not left,
// not hung or cut off, and not superseded by a newer incarnation of their id.
func (c *Cluster) ActiveWorkers() []*Worker {
	var out []*Worker
	newest := map[string]*Worker{}
	for _, w := range c.Workers() {
		newest[w.ID] = w
	}
	for _, w := range c.Workers() {
		if newest[w.ID] == w && w.expectedActive() {
			out = append(out, w)
		}
	}
	return out
}

// WaitSettled waits until the leases usable now are exactly those of ActiveWorkers, each worker's
// ranges are its equal share (Split of the active count, in join order of the shares' indexes), and
// one of them is Node-0. It notes EventSettled and returns its instant: from there until the next
// fault the history must show the whole ring covered. With no active worker it waits until nobody
// holds anything, and no coverage is owed.
func (c *Cluster) WaitSettled(timeout time.Duration) time.Duration {
	c.t.Helper()
	at, err := c.TryWaitSettled(timeout)
	if err != nil {
		c.t.Fatalf("ringtest: %v\n%s", err, c.describe())
	}
	return at
}

// TryWaitSettled is WaitSettled returning an error instead of failing the test.
func (c *Cluster) TryWaitSettled(timeout time.Duration) (time.Duration, error) {
	var last string
	err := poll(timeout, func() bool {
		ok, why := c.settledNow()
		last = why
		return ok
	})
	if err != nil {
		return 0, fmt.Errorf("ring not settled within %v: %s", timeout, last)
	}
	if len(c.ActiveWorkers()) == 0 {
		// Nobody to cover the ring: settled, but no window in which coverage is owed.
		return c.rec.Now(), nil
	}
	return c.rec.Note(Event{Kind: EventSettled}), nil
}

// settledNow compares what is usable now with the expected equal split.
func (c *Cluster) settledNow() (bool, string) {
	active := c.ActiveWorkers()
	holding := c.rec.Holding()
	want := map[string]bool{}
	for _, w := range active {
		want[w.Holder()] = true
	}
	for h, iv := range holding {
		if !want[h] && (!iv.Ranges.Empty() || iv.Node0) {
			return false, fmt.Sprintf("%s still holds %v", h, iv.Ranges)
		}
	}
	if len(active) == 0 {
		return true, ""
	}
	if l, err := c.WaitLeader(0); err == nil {
		if r, ok := l.View().Ring(c.opts.Ring); ok && r.Movement.Mode == fsm.ModeMinimal {
			return c.settledMinimal(active, holding)
		}
	}
	split := lease.Split(len(active))
	used := make([]bool, len(split))
	for _, w := range active {
		iv, ok := holding[w.Holder()]
		if !ok {
			return false, fmt.Sprintf("%s holds no usable lease", w.Holder())
		}
		i := iv.NodeIndex
		if i < 0 || i >= len(split) || used[i] || !iv.Ranges.Equal(lease.Ranges{split[i]}) || iv.NodeCount != len(split) {
			return false, fmt.Sprintf("%s holds node %d/%d %v, not an equal share of %d", w.Holder(), i, iv.NodeCount, iv.Ranges, len(split))
		}
		used[i] = true
	}
	return c.committedSettled(active, holding)
}

// settledMinimal is settledNow for a ring in the minimal movement mode, whose shares are not equal:
// the active workers' usable leases cover the ring with no gap and no overlap, with distinct node
// indexes, one of them Node-0, and agree with the leader's committed state.
func (c *Cluster) settledMinimal(active []*Worker, holding map[string]Interval) (bool, string) {
	var all lease.Ranges
	indexes := map[int]string{}
	for _, w := range active {
		iv, ok := holding[w.Holder()]
		if !ok {
			return false, fmt.Sprintf("%s holds no usable lease", w.Holder())
		}
		if all.Overlaps(iv.Ranges) {
			return false, fmt.Sprintf("%s holds %v, which another worker holds too", w.Holder(), iv.Ranges)
		}
		if other, dup := indexes[iv.NodeIndex]; dup || iv.NodeIndex < 0 || iv.NodeIndex >= iv.NodeCount {
			return false, fmt.Sprintf("%s holds node %d/%d (also %q)", w.Holder(), iv.NodeIndex, iv.NodeCount, other)
		}
		indexes[iv.NodeIndex] = w.Holder()
		all = all.Union(iv.Ranges)
	}
	if !all.Equal(lease.Ranges{lease.FullRing}) {
		return false, fmt.Sprintf("the active workers hold %v, not the whole ring", all)
	}
	if _, ok := indexes[0]; !ok {
		return false, "nobody is Node-0"
	}
	return c.committedSettled(active, holding)
}

// committedSettled checks the leader's committed state against what the workers hold: every active
// worker has received an element since this leader was noted, exactly the active workers are
// members, all assigned, with the ranges their leases carry, and the watcher has noted the current
// generation (so that the settled window does not start before a membership change that the
// watcher is about to note).
func (c *Cluster) committedSettled(active []*Worker, holding map[string]Interval) (bool, string) {
	l, err := c.WaitLeader(0)
	if err != nil {
		return false, "no leader"
	}
	c.mu.Lock()
	noted, since := c.leader, c.leaderSince
	c.mu.Unlock()
	if noted != l {
		return false, fmt.Sprintf("leader %s not noted yet", l.ID)
	}
	// Leases granted by a dead or deposed leader are still usable for a while; the ring is settled
	// only once the current leader renews them.
	for _, w := range active {
		if at, ok := c.rec.LastInstall(w.ID, w.Incarnation); !ok || at < since {
			return false, fmt.Sprintf("%s has had nothing from leader %s yet", w.Holder(), l.ID)
		}
	}
	r, ok := l.View().Ring(c.opts.Ring)
	if !ok {
		return false, "the leader has no such ring"
	}
	if g := c.noted.Load(); g != r.Generation {
		return false, fmt.Sprintf("generation %d not noted yet (last noted %d)", r.Generation, g)
	}
	running := make(map[string]string, len(active))
	for _, w := range active {
		running[w.ID] = w.Incarnation
	}
	if err := r.AtRest(running); err != nil {
		return false, "in the leader's state, " + err.Error()
	}
	for _, m := range r.Members {
		iv := holding[holderName(m.WorkerID, m.Incarnation)]
		ranges, err := lease.DecodeRanges(m.Ranges)
		if err != nil || !ranges.Equal(iv.Ranges) || m.NodeIndex != iv.NodeIndex {
			return false, fmt.Sprintf("member %s is node %d %v in the leader's state, its lease says node %d %v",
				iv.Holder(), m.NodeIndex, ranges, iv.NodeIndex, iv.Ranges)
		}
	}
	return true, ""
}

// WaitRenewals waits (bounded by timeout) until every active worker has installed n more lease
// elements: the steady state of a settled ring, observed across renewals rather than slept through.
func (c *Cluster) WaitRenewals(n int, timeout time.Duration) {
	c.t.Helper()
	since := c.rec.Now()
	active := c.ActiveWorkers()
	err := poll(timeout, func() bool {
		counts := map[string]int{}
		for _, e := range c.rec.Events() {
			if e.Kind == EventInstall && e.At > since {
				counts[holderName(e.Worker, e.Incarnation)]++
			}
		}
		for _, w := range active {
			if counts[w.Holder()] < n {
				return false
			}
		}
		return true
	})
	if err != nil {
		c.t.Fatalf("ringtest: %d renewals not seen within %v\n%s", n, timeout, c.describe())
	}
}

// CheckHistory runs every check on the history so far and fails the test with each violation.
// It returns the violations.
func (c *Cluster) CheckHistory() []Violation {
	c.t.Helper()
	h := c.rec.History()
	vs := Check(h)
	if len(vs) > 0 {
		c.t.Errorf("ringtest: %d violations in the history:%s\n%s", len(vs), FormatViolations(vs, 20), c.describeAround(vs[0].At))
	}
	return vs
}

// describe renders the recent timeline and what is usable now, for a failure message.
func (c *Cluster) describe() string {
	events := c.rec.Events()
	if len(events) > 60 {
		events = events[len(events)-60:]
	}
	var b strings.Builder
	writeEvents(&b, "timeline (last 60 events)", events)
	b.WriteString("usable now:\n")
	holding := c.rec.Holding()
	keys := make([]string, 0, len(holding))
	for h := range holding {
		keys = append(keys, h)
	}
	sort.Strings(keys)
	for _, h := range keys {
		fmt.Fprintf(&b, "\t%v\n", holding[h])
	}
	return b.String()
}

// describeAround renders the events around instant at, and the intervals live then.
func (c *Cluster) describeAround(at time.Duration) string {
	var near []Event
	for _, e := range c.rec.Events() {
		if e.At >= at-2*time.Second && e.At <= at+500*time.Millisecond {
			near = append(near, e)
		}
	}
	var b strings.Builder
	writeEvents(&b, fmt.Sprintf("events from 2s before to 500ms after %v", at), near)
	fmt.Fprintf(&b, "intervals live at %v:\n", at)
	for _, iv := range c.rec.Intervals() {
		if iv.From <= at && at < iv.To {
			fmt.Fprintf(&b, "\t%v\n", iv)
		}
	}
	return b.String()
}

func writeEvents(b *strings.Builder, title string, events []Event) {
	fmt.Fprintf(b, "%s:\n", title)
	for _, e := range events {
		fmt.Fprintf(b, "\t%v\n", e)
	}
}

// Close stops every worker, coordinator and proxy, then fails the test if a goroutine of the
// coordinator, the lease client, the proxies or Raft is still running; NewCluster registers it with
// t.Cleanup. On a failed test it prints the buffered component logs. Because that check and the
// routing of rsocket-go's logs are process-wide, clusters of one test binary must not run in
// parallel.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	workers := append([]*Worker(nil), c.workers...)
	c.mu.Unlock()
	if c.watchStop != nil {
		close(c.watchStop)
		<-c.watchDone
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.shutdown()
		}()
	}
	wg.Wait()
	for _, co := range c.coords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			co.close()
		}()
	}
	wg.Wait()
	for _, w := range workers {
		_ = w.proxy.Close()
	}
	if leaked := leakedGoroutines(c.baseline); len(leaked) > 0 {
		c.t.Errorf("ringtest: %d goroutines still running after Close:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
	if c.t.Failed() {
		c.t.Logf("ringtest: last component logs:\n%s", c.logs.String())
	}
}

// classify routes an RSocket connection through the network of the worker that opened it, whichever
// coordinator (or redirect) it reached.
func (c *Cluster) classify(peek func(n int) ([]byte, error)) []*faultproxy.Proxy {
	s, ok := peekSetup(peek)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.byConn[holderName(s.WorkerID, s.Incarnation)]; p != nil {
		return []*faultproxy.Proxy{p}
	}
	return nil
}

// poll evaluates cond every few milliseconds until it holds or timeout passes (at least once).
func poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errTimeout
		}
		time.Sleep(pollInterval)
	}
}

// pollInterval is how often the harness looks at state it waits for. Waits are bounded by their
// timeout; this only sets the resolution of the instants they report.
const pollInterval = 5 * time.Millisecond

// errTimeout: a bounded wait of the harness ran out.
var errTimeout = errors.New("ringtest: timed out")
