package worker

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// lagging is a writer's clock: behind another clock by a fixed amount.
type lagging struct {
	base lease.Clock
	lag  time.Duration
}

func (l lagging) Now() time.Time { return l.base.Now().Add(-l.lag) }

// env is one test's Cassandra keyspace, holding the schema, and a Store for one ring on it.
type env struct {
	t       *testing.T
	session *gocql.Session
	ks      string
	ring    lease.RingKey
	length  int
	store   *cassandra.Store
	clock   *clocktest.Manual // the workers' clock
}

func newEnv(t *testing.T, windowMinutes int, now time.Time) *env {
	t.Helper()
	s := cassandratest.Session(t)
	ks := cassandratest.NewKeyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	ring := lease.RingKey{Region: "eu-test", Cluster: "c1", Service: "orders"}
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: windowMinutes, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Every write of the env (the test's writers and the workers' own) lags the workers' write
	// clock, the wall clock, by the whole bound. The manual clock compresses hours into
	// milliseconds of wall time: without the lag a checked delete, stamped max_clock_offset
	// back, would spare rows written a moment before it, which in production are older than
	// the bound by then (written before their window started).
	st = st.WithWriteClock(clocktest.NewShifted(-DefaultMaxClockOffset))
	return &env{t: t, session: s, ks: ks, ring: ring, length: windowMinutes, store: st, clock: clocktest.New(now)}
}

// win names a window of the env's length.
func (e *env) win(day window.Date, minute int) window.Window {
	e.t.Helper()
	w, err := window.New(day, minute, e.length)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// guard holds a lease on ranges, valid for ttl from the env clock's now.
func (e *env) guard(ranges lease.Ranges, nodeIndex, nodeCount int, ttl time.Duration) *lease.Guard {
	g := lease.NewGuard(e.clock, 100*time.Millisecond)
	g.Set(lease.Lease{
		WorkerID: "w", Ring: e.ring, NodeIndex: nodeIndex, NodeCount: nodeCount, Epoch: 1,
		Ranges: ranges, TTL: ttl, ValidFrom: e.clock.Now(),
	})
	return g
}

func fullRing() lease.Ranges { return lease.Ranges{{Start: lease.MinToken, End: lease.MaxToken}} }

func (e *env) config(workerID string) Config {
	return Config{
		Region: e.ring.Region, Cluster: e.ring.Cluster, Service: e.ring.Service, WorkerID: workerID,
		WindowMinutes: e.length, Clock: e.clock,
		// Generous for a loaded 2-core machine; leases in these tests are long.
		QueryTimeout: 5 * time.Second, ExecTimeout: 5 * time.Second,
	}
}

func (e *env) scanner(cfg Config, g Guard, ex Executor) *Scanner {
	e.t.Helper()
	sc, err := New(cfg, e.store, g, ex)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

// record writes failures of the step Payment of instance into target through the real write
// path, with the writer's clock set shortly before target starts (the normal W+1 protocol).
func (e *env) record(instance string, target window.Window, bucketSize int, ids ...string) {
	e.t.Helper()
	e.recordStep("Payment", instance, target, bucketSize, ids...)
}

// recordStep is record for the step impl.
func (e *env) recordStep(impl, instance string, target window.Window, bucketSize int, ids ...string) {
	e.t.Helper()
	clock := clocktest.New(target.Start().Add(-30 * time.Second))
	rec, err := uncheckedRecorder(e.store, recorder.Config{InstanceID: instance, BucketSize: bucketSize, Clock: clock})
	if err != nil {
		e.t.Fatal(err)
	}
	fs := make([]recorder.Failure, len(ids))
	for i, id := range ids {
		fs[i] = recorder.Failure{TransactionID: id, ImplType: impl, AllocationKey: "k-" + id}
	}
	if err := rec.RecordAt(context.Background(), target, fs...); err != nil {
		e.t.Fatalf("record into %s: %v", target, err)
	}
}

// count is the number of rows of a table of the env's keyspace (a test-only full scan).
func (e *env) count(table string) int {
	e.t.Helper()
	var n int64
	if err := e.session.Query("SELECT count(*) FROM " + e.ks + "." + table).Scan(&n); err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return int(n)
}

// windowsLeft lists the tier-2 rows of the keyspace, earliest first.
func (e *env) windowsLeft() []window.Window {
	e.t.Helper()
	iter := e.session.Query("SELECT date_of_year, minute_of_day FROM " + e.ks + ".es_retry_windows_by_day").Iter()
	var out []window.Window
	var d time.Time
	var m int
	for iter.Scan(&d, &m) {
		out = append(out, window.Window{Day: window.DateOf(d), Minute: m, Length: e.length})
	}
	if err := iter.Close(); err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Compare(out[j]) < 0 })
	return out
}

// daysLeft lists the tier-1 rows of the keyspace, oldest first.
func (e *env) daysLeft() []window.Date {
	e.t.Helper()
	iter := e.session.Query("SELECT date_of_year FROM " + e.ks + ".es_days_by_year").Iter()
	var out []window.Date
	var d time.Time
	for iter.Scan(&d) {
		out = append(out, window.DateOf(d))
	}
	if err := iter.Close(); err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// marker reads the marker of the step Payment of transaction id.
func (e *env) marker(id string) (cassandra.Marker, bool) {
	e.t.Helper()
	return e.stepMarker(id, "Payment")
}

// stepMarker reads the marker of the step impl of transaction id.
func (e *env) stepMarker(id, impl string) (cassandra.Marker, bool) {
	e.t.Helper()
	m, ok, err := e.store.Marker(context.Background(), id, impl)
	if err != nil {
		e.t.Fatal(err)
	}
	return m, ok
}

// assertDrained checks invariant 8 at the env clock's now: tiers 3 to 5 are empty, tier 2 holds
// only windows whose time has not passed, tier 1 only days that are not over.
func (e *env) assertDrained(offset time.Duration) {
	e.t.Helper()
	for _, table := range []string{"es_instances_by_retry_window", "es_buckets_by_instance", "es_retry_transactions_by_instance"} {
		if n := e.count(table); n != 0 {
			e.t.Errorf("%s holds %d rows after the drain, want 0", table, n)
		}
	}
	now := e.clock.Now()
	for _, w := range e.windowsLeft() {
		if window.DeletableWindow(w, now, offset) {
			e.t.Errorf("tier 2 still holds %s, whose time has passed at %s", w, now)
		}
	}
	for _, d := range e.daysLeft() {
		if window.DeletableDay(d, now, offset) {
			e.t.Errorf("tier 1 still holds %s, which is over at %s", d, now)
		}
	}
}

// drain runs cycles until one makes no progress; it fails the test after max cycles.
func drain(t *testing.T, sc *Scanner, max int) Stats {
	t.Helper()
	before := sc.Stats()
	for i := 0; i < max; i++ {
		res, err := sc.Cycle(context.Background())
		if err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if !res.Progress() {
			return sc.Stats().Sub(before)
		}
	}
	t.Fatalf("still making progress after %d cycles", max)
	return Stats{}
}

// recordingExecutor remembers every task it ran, and answers with answer (Done when nil).
type recordingExecutor struct {
	mu     sync.Mutex
	tasks  []Task
	answer func(Task, int) Outcome // the task and how many times its transaction ran before
}

func (r *recordingExecutor) Execute(ctx context.Context, t Task) Outcome {
	r.mu.Lock()
	n := 0
	for _, p := range r.tasks {
		if p.TransactionID == t.TransactionID {
			n++
		}
	}
	r.tasks = append(r.tasks, t)
	answer := r.answer
	r.mu.Unlock()
	if answer == nil {
		return Outcome{Kind: Done, Status: 200}
	}
	return answer(t, n)
}

// runs counts the executions of each transaction.
func (r *recordingExecutor) runs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, t := range r.tasks {
		out[t.TransactionID]++
	}
	return out
}

func (r *recordingExecutor) all() []Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Task(nil), r.tasks...)
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}

// uncheckedRecorder is recorder.New with UncheckedClock: the tests' recorders run on manual
// clocks that name past windows on purpose, which a check against Cassandra's clock would refuse;
// the skews these tests need go through the store's write clock instead.
func uncheckedRecorder(st *cassandra.Store, cfg recorder.Config) (*recorder.Recorder, error) {
	cfg.UncheckedClock = true
	return recorder.New(st, cfg)
}
