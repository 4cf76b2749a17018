package deadletter_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/deadletter"
	"github.com/retryring/retryring/internal/cassandratest"
	"github.com/retryring/retryring/internal/clocktest"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

var noon = time.Date(2026, time.March, 10, 12, 0, 10, 0, time.UTC)

// env is a keyspace with the schema, a store for one ring, one worker holding the whole ring on a
// manual clock, and a downstream that refuses the steps named in refuse for good.
type env struct {
	t       *testing.T
	store   *cassandra.Store
	clock   *clocktest.Manual
	scanner *worker.Scanner

	mu     sync.Mutex
	refuse map[string]bool
	calls  []worker.Task
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := cassandratest.Session(t)
	ks := cassandratest.NewKeyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatal(err)
	}
	ring := lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, clock: clocktest.New(noon), refuse: map[string]bool{}}
	g := lease.NewGuard(e.clock, 100*time.Millisecond)
	g.Set(lease.Lease{WorkerID: "w0", Ring: ring, NodeCount: 1, Epoch: 1,
		Ranges: lease.Ranges{{Start: lease.MinToken, End: lease.MaxToken}}, TTL: 72 * time.Hour, ValidFrom: e.clock.Now()})
	e.scanner, err = worker.New(worker.Config{Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "w0",
		WindowMinutes: 1, Clock: e.clock, QueryTimeout: 5 * time.Second, ExecTimeout: 5 * time.Second},
		st, g, worker.ExecutorFunc(e.execute))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) execute(_ context.Context, t worker.Task) worker.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, t)
	if e.refuse[t.TransactionID] {
		return worker.Outcome{Kind: worker.Permanent, Status: 422, Err: errors.New("422 refused")}
	}
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

func (e *env) setRefused(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.refuse)
	for _, id := range ids {
		e.refuse[id] = true
	}
}

// callsOf lists the replay generations of the calls of id, in order.
func (e *env) callsOf(id string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for _, c := range e.calls {
		if c.TransactionID == id {
			out = append(out, c.Replay)
		}
	}
	return out
}

// record writes failures of pod-a into the window after the clock's, the normal way.
func (e *env) record(ids ...string) {
	e.t.Helper()
	rec := e.recorder("pod-a")
	for _, id := range ids {
		if _, err := rec.Record(context.Background(), recorder.Failure{TransactionID: id, ImplType: "Payment", AllocationKey: "k"}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) recorder(instance string) *recorder.Recorder {
	e.t.Helper()
	rec, err := recorder.New(e.store, recorder.Config{InstanceID: instance, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// drainFor advances the clock a window at a time for n windows, draining what is readable.
func (e *env) drainFor(n int) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.clock.Advance(time.Minute)
		for c := 0; c < 4; c++ {
			res, err := e.scanner.Cycle(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			if !res.Progress() {
				break
			}
		}
	}
}

func (e *env) filter() deadletter.Filter { return deadletter.Filter{Until: e.clock.Now()} }

// TestReplayExecutesEachDeadLetterOnceAndIsIdempotentByID: dead letters replayed after the
// downstream was fixed are executed once each, at generation 1, under the key of the replay; the
// older copies never run again; the same --id again replays nothing; a second id finds them
// replayed already.
func TestReplayExecutesEachDeadLetterOnceAndIsIdempotentByID(t *testing.T) {
	e := newEnv(t)
	e.setRefused("a", "b")
	e.record("a", "b", "ok")
	e.drainFor(3)
	list, err := deadletter.List(context.Background(), e.store, e.filter())
	if err != nil || len(list) != 2 {
		t.Fatalf("dead letters %+v, %v; want a and b", list, err)
	}

	e.setRefused() // the downstream was fixed
	rec := e.recorder("deadletters-replay")
	res, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "fix-1", Now: e.clock.Now})
	if err != nil || res.Matched != 2 || res.Replayed != 2 {
		t.Fatalf("replay: %+v, %v; want 2 replayed", res, err)
	}
	for _, id := range []string{"a", "b"} {
		m, _, err := e.store.Marker(context.Background(), id, "Payment")
		if err != nil || !m.HasFloor || m.Floor != (cassandra.Copy{Replay: 1}) {
			t.Fatalf("marker of %s after the replay: %+v, %v; want floor r1/a0", id, m, err)
		}
	}
	e.drainFor(3)
	for _, id := range []string{"a", "b"} {
		if got := e.callsOf(id); len(got) != 2 || got[0] != 0 || got[1] != 1 {
			t.Errorf("%s was called at generations %v, want [0 1] (refused, then replayed once)", id, got)
		}
	}
	if got := e.callsOf("ok"); len(got) != 1 {
		t.Errorf("ok was called %d times, want 1", len(got))
	}

	again, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "fix-1", Now: e.clock.Now})
	if err != nil || again.Replayed != 0 || again.AlreadyReplayed != 2 {
		t.Fatalf("the same id again: %+v, %v; want nothing replayed, 2 already", again, err)
	}
	other, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "fix-2", Now: e.clock.Now})
	if err != nil || other.Replayed != 0 || other.AlreadyReplayed+other.AlreadyDone != 2 {
		t.Fatalf("another id: %+v, %v; want nothing replayed", other, err)
	}
	list, _ = deadletter.List(context.Background(), e.store, e.filter())
	for _, d := range list {
		if d.ReplayedBy != "fix-1" || d.ReplayedAt.IsZero() {
			t.Errorf("dead letter %s kept as %q at %v; want marked by fix-1", d.Transaction.ID, d.ReplayedBy, d.ReplayedAt)
		}
	}
	e.drainFor(2)
	if got := e.callsOf("a"); len(got) != 2 {
		t.Errorf("a was called %d times after the repeated replays, want still 2", len(got))
	}
}

// failingStore fails MarkDeadLetterReplayed for one transaction: Cassandra gone mid-run.
type failingStore struct {
	*cassandra.Store
	fail string
}

func (f failingStore) MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, id string, at time.Time) error {
	if d.Transaction.ID == f.fail {
		return errors.New("injected: cassandra unavailable")
	}
	return f.Store.MarkDeadLetterReplayed(ctx, d, id, at)
}

// TestReplayStoppedByAnErrorCompletesWhenRunAgain: a replay that fails mid-run stops with an
// error saying how far it got; running the same id again completes it, a dead letter given up
// on after the run's first start is not taken, and no step is executed twice.
func TestReplayStoppedByAnErrorCompletesWhenRunAgain(t *testing.T) {
	e := newEnv(t)
	e.setRefused("a", "b", "c")
	e.record("a", "b", "c")
	e.drainFor(3)
	e.setRefused()
	rec := e.recorder("deadletters-replay")
	// One at a time, so that the run stops right at b (with more in flight, those finish first).
	res, err := deadletter.Replay(context.Background(), failingStore{e.store, "b"}, rec, e.filter(), deadletter.ReplayOptions{ID: "r", Now: e.clock.Now, Concurrency: 1})
	if err == nil || !strings.Contains(err.Error(), "run it again") || res.Replayed != 1 {
		t.Fatalf("replay with Cassandra failing at b: %+v, %v; want an error after 1 replayed", res, err)
	}
	// Meanwhile another step is given up on: it is after the run's start.
	e.clock.Advance(time.Minute)
	e.setRefused("late")
	e.record("late")
	e.drainFor(3)
	e.setRefused()

	res, err = deadletter.Replay(context.Background(), e.store, rec, deadletter.Filter{Until: e.clock.Now()}, deadletter.ReplayOptions{ID: "r", Now: e.clock.Now})
	// b's copy was written before the failure and ran meanwhile: b is done, not copied again.
	if err != nil || res.Replayed != 1 || res.AlreadyReplayed != 1 || res.AlreadyDone != 1 {
		t.Fatalf("running r again: %+v, %v; want c replayed, a already replayed, b already done", res, err)
	}
	e.drainFor(3)
	for _, id := range []string{"a", "b", "c"} {
		if got := e.callsOf(id); len(got) != 2 {
			t.Errorf("%s was called %v, want twice (refused, then replayed once)", id, got)
		}
	}
	if got := e.callsOf("late"); len(got) != 1 {
		t.Errorf("late was called %v; want once (given up on after the run started: not replayed by it)", got)
	}
}

// TestReplayAndPurgeFilters: filters that match nothing replay nothing and say so; a dry run
// writes nothing; purge deletes what it selects, a whole day by one partition delete.
func TestReplayAndPurgeFilters(t *testing.T) {
	e := newEnv(t)
	e.setRefused("a", "b")
	e.record("a", "b")
	e.drainFor(3)
	rec := e.recorder("deadletters-replay")
	f := e.filter()
	f.Impl = []string{"NoSuchStep"}
	res, err := deadletter.Replay(context.Background(), e.store, rec, f, deadletter.ReplayOptions{ID: "none", Now: e.clock.Now})
	if err != nil || res.Matched != 0 || res.Replayed != 0 {
		t.Fatalf("a filter matching nothing: %+v, %v", res, err)
	}
	dry, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "dry", DryRun: true, Now: e.clock.Now})
	if err != nil || dry.Replayed != 2 {
		t.Fatalf("dry run: %+v, %v; want 2 that would be replayed", dry, err)
	}
	if m, _, _ := e.store.Marker(context.Background(), "a", "Payment"); m.Floor != (cassandra.Copy{Replay: 1}) || m.State != cassandra.MarkerDeadLettered {
		t.Fatalf("marker after the dry run: %+v (the dead letter's own floor and state, unchanged)", m)
	}
	if _, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{Now: e.clock.Now}); !errors.Is(err, deadletter.ErrReplayID) {
		t.Fatalf("no id: %v", err)
	}
	if _, err := deadletter.List(context.Background(), e.store, deadletter.Filter{}); !errors.Is(err, deadletter.ErrFilter) {
		t.Fatalf("no time bound: %v", err)
	}

	pf := e.filter()
	pf.Instance = []string{"pod-a"}
	pf.Status = []int{422}
	pf.Impl = []string{"Payment"}
	pf.Since = noon.Add(-time.Hour)
	n, err := deadletter.Purge(context.Background(), e.store, pf)
	if err != nil || n != 2 {
		t.Fatalf("purge with filters: %d, %v; want 2", n, err)
	}
	e.setRefused("c")
	e.record("c")
	e.drainFor(3)
	day := window.DateOf(e.clock.Now())
	n, err = deadletter.Purge(context.Background(), e.store, deadletter.Filter{Since: day.Time(), Until: day.AddDays(1).Time()})
	if err != nil || n != 1 {
		t.Fatalf("purge of a whole day: %d, %v; want 1", n, err)
	}
	if list, _ := deadletter.List(context.Background(), e.store, deadletter.Filter{Until: day.AddDays(1).Time()}); len(list) != 0 {
		t.Fatalf("dead letters left after the purges: %+v", list)
	}
}

// TestReplayOfAStepDeadLetteredBeforeFloors: a dead letter whose marker is DEAD_LETTERED with no
// floor (a release before floors) is replayed and runs: the replay writes the floor.
func TestReplayOfAStepDeadLetteredBeforeFloors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w, err := window.Of(noon, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.InsertDeadLetter(ctx, cassandra.DeadLetter{
		Bucket:      cassandra.BucketKey{Window: w, InstanceID: "pod-a"},
		Transaction: cassandra.Transaction{ID: "old", ImplType: "Payment", Attempt: 10, AddedAt: noon},
		LastStatus:  503, DeadAt: noon, WorkerID: "w9",
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.MarkDeadLettered(ctx, "old", "Payment", "w9", noon, 0); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	res, err := deadletter.Replay(ctx, e.store, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "legacy", Now: e.clock.Now})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	e.drainFor(3)
	if got := e.callsOf("old"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("old was called at generations %v, want [1]", got)
	}
}
