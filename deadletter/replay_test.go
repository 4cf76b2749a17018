package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/deadletter"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

var noon = time.Date(2026, time.March, 10, 12, 0, 10, 0, time.UTC)

// env is a keyspace with the schema, a store for one ring, one worker holding the whole ring on a
// manual clock, and a downstream that refuses the steps named in refuse for good.
type env struct {
	t       *testing.T
	session *gocql.Session
	ks      string
	store   *cassandra.Store
	clock   *clocktest.Manual
	scanner *worker.Scanner

	mu        sync.Mutex
	refuse    map[string]bool
	transient map[string]bool // answered 503
	calls     []worker.Task
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
	// Writes lag the worker's write clock (the wall clock) by the whole bound: the manual clock
	// drains rows a moment of wall time after they were written, and a checked delete, stamped
	// max_clock_offset back, spares rows that recent (docs/schema.md, "Checked deletes").
	st = st.WithWriteClock(clocktest.NewShifted(-worker.DefaultMaxClockOffset))
	e := &env{t: t, session: s, ks: ks, store: st, clock: clocktest.New(noon), refuse: map[string]bool{}, transient: map[string]bool{}}
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
	if e.transient[t.TransactionID] {
		return worker.Outcome{Kind: worker.Transient, Status: 503, Err: errors.New("503 unavailable")}
	}
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

// setUnavailable makes the downstream answer 503 to the steps of ids (none: to nobody).
func (e *env) setUnavailable(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.transient)
	for _, id := range ids {
		e.transient[id] = true
	}
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
	// Unchecked: the env's manual clock names windows of March 2026 on purpose; the writes are
	// stamped by the store's write clock.
	rec, err := recorder.New(e.store, recorder.Config{InstanceID: instance, Clock: e.clock, UncheckedClock: true})
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

// copiesOf lists the tier-5 rows of a transaction anywhere in the keyspace, as r<replay>/a<attempt>
// (a test-only scan).
func (e *env) copiesOf(id string) []string {
	e.t.Helper()
	iter := e.session.Query("SELECT attempt, replay FROM "+e.ks+
		".es_retry_transactions_by_instance WHERE transaction_id = ? ALLOW FILTERING", id).Iter()
	var out []string
	var attempt int
	var replay *int
	for iter.Scan(&attempt, &replay) {
		r := 0
		if replay != nil {
			r = *replay
		}
		out = append(out, fmt.Sprintf("r%d/a%d", r, attempt))
	}
	if err := iter.Close(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestReplayOfASupersededDeadLetterWritesNoCopy: a replay's mark is lost (Cassandra failed at
// it), and the copy it wrote runs and fails again, moving the floor past the replay's generation
// at attempt 0. A later replay of the same dead letter must not count it as replayed: the copy it
// would write sits below the floor and would be finished without a call. It says so (its own
// outcome, in a dry run too) and writes nothing.
func TestReplayOfASupersededDeadLetterWritesNoCopy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setRefused("a")
	e.record("a")
	e.drainFor(3)
	e.setRefused()
	rec := e.recorder("deadletters-replay")
	if _, err := deadletter.Replay(ctx, failingStore{e.store, "a"}, rec, e.filter(), deadletter.ReplayOptions{ID: "lost-mark", Now: e.clock.Now}); err == nil {
		t.Fatal("the replay whose mark failed reported no error")
	}
	e.setUnavailable("a") // the replayed copy runs and fails again: recorded again at r1/a1
	e.drainFor(1)         // its window only: r1/a1 waits a minute or two ahead
	if m, _, err := e.store.Marker(ctx, "a", "Payment"); err != nil || m.Floor != (cassandra.Copy{Replay: 1, Attempt: 1}) {
		t.Fatalf("marker of a after its replayed copy failed: %+v, %v; want floor r1/a1", m, err)
	}
	before := e.copiesOf("a")
	if len(before) != 1 || before[0] != "r1/a1" {
		t.Fatalf("rows of a %v; want its copy r1/a1 alone", before)
	}

	var outcomes []deadletter.Outcome
	each := func(_ cassandra.DeadLetter, out deadletter.Outcome, _ cassandra.BucketKey) {
		outcomes = append(outcomes, out)
	}
	dry, err := deadletter.Replay(ctx, e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "dry", DryRun: true, Now: e.clock.Now, Each: each})
	if err != nil || dry.Replayed != 0 || dry.Superseded != 1 || len(outcomes) != 1 || outcomes[0] != deadletter.Superseded {
		t.Fatalf("dry run: %+v, outcomes %v, %v; want one superseded, none that would be replayed", dry, outcomes, err)
	}
	res, err := deadletter.Replay(ctx, e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "again", Now: e.clock.Now})
	if err != nil || res.Replayed != 0 || res.Superseded != 1 {
		t.Fatalf("replay of the superseded dead letter: %+v, %v; want it reported superseded, not replayed", res, err)
	}
	if after := e.copiesOf("a"); len(after) != 1 || after[0] != "r1/a1" {
		t.Fatalf("rows of a after the replay %v; want still r1/a1 alone (no copy below the floor)", after)
	}
	e.setUnavailable()
	e.drainFor(4)
	if got := e.callsOf("a"); len(got) != 3 {
		t.Errorf("a was called at generations %v; want [0 1 1] (refused, its replay 503, its retry)", got)
	}
}

// meddlingStore runs between a replay's copy and its mark: another process changes the dead
// letter at just that moment.
type meddlingStore struct {
	*cassandra.Store
	meddle func(d cassandra.DeadLetter)
}

func (m meddlingStore) MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, id string, at time.Time) error {
	m.meddle(d)
	return m.Store.MarkDeadLetterReplayed(ctx, d, id, at)
}

// TestReplayMarksOnlyTheDeadLetterItRead: the mark of a replay lands on the row it read or on
// nothing. A dead letter purged between its copy and its mark does not come back as a ghost; one
// written over by the step's next dead letter (given up on again, a generation later) is not
// marked as if that one had been replayed. Either is reported, and the run goes on.
func TestReplayMarksOnlyTheDeadLetterItRead(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setRefused("purged", "again")
	e.record("purged", "again")
	e.drainFor(3)
	e.setRefused()
	var newer cassandra.DeadLetter
	st := meddlingStore{Store: e.store, meddle: func(d cassandra.DeadLetter) {
		switch d.Transaction.ID {
		case "purged":
			if err := e.store.DeleteDeadLetter(ctx, d); err != nil {
				t.Error(err)
			}
		case "again":
			newer = d
			newer.Transaction.Replay, newer.Transaction.Attempt = 1, 1
			newer.DeadAt = d.DeadAt.Add(30 * time.Second).Truncate(time.Millisecond)
			newer.LastError = "422 refused, generation 1"
			if err := e.store.InsertDeadLetter(ctx, newer); err != nil {
				t.Error(err)
			}
		}
	}}
	var outcomes = map[string]deadletter.Outcome{}
	res, err := deadletter.Replay(ctx, st, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "r", Now: e.clock.Now,
		Each: func(d cassandra.DeadLetter, out deadletter.Outcome, _ cassandra.BucketKey) {
			outcomes[d.Transaction.ID] = out
		}})
	if err != nil || res.Unmarked != 2 || res.Replayed != 0 {
		t.Fatalf("replay: %+v, %v; want both copied and reported unmarked", res, err)
	}
	if outcomes["purged"] != deadletter.Unmarked || outcomes["again"] != deadletter.Unmarked {
		t.Errorf("outcomes %v; want both %s", outcomes, deadletter.Unmarked)
	}
	list, err := deadletter.List(ctx, e.store, deadletter.Filter{Until: e.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("dead letters after the replay %+v; want the newer one of again alone (no ghost of purged)", list)
	}
	if d := list[0]; d.Transaction.ID != "again" || d.Transaction.Replay != 1 || d.ReplayedBy != "" {
		t.Errorf("dead letter %+v; want again's generation 1, not marked replayed (no replay took it)", d)
	}
	// The failed condition says why, through the sentinel.
	err = e.store.MarkDeadLetterReplayed(ctx, cassandra.DeadLetter{Bucket: newer.Bucket, Transaction: newer.Transaction, DeadAt: noon}, "r", e.clock.Now())
	if !errors.Is(err, cassandra.ErrDeadLetterChanged) || !strings.Contains(err.Error(), "given up on again") {
		t.Errorf("mark of a row read before it was written again: %v; want ErrDeadLetterChanged saying so", err)
	}
}

// TestReplayOfADuplicateDeadLetteredAfterCommit: the same step was recorded under two instance
// ids; one copy ran and committed, then the other was refused (a 4xx after the success) and
// dead-lettered with a dead letter's writes: the dead letter, the floor past its generation,
// DEAD_LETTERED. The step ran: a replay replays nothing for it and says it was already done,
// and no later pass calls it again.
func TestReplayOfADuplicateDeadLetteredAfterCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.record("x")
	e.drainFor(3)
	if got := e.callsOf("x"); len(got) != 1 {
		t.Fatalf("x was called at generations %v, want once", got)
	}
	w, err := window.Of(noon, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	if err := e.store.InsertDeadLetter(ctx, cassandra.DeadLetter{
		Bucket:      cassandra.BucketKey{Window: w, InstanceID: "pod-b"},
		Transaction: cassandra.Transaction{ID: "x", ImplType: "Payment", Attempt: 1, AddedAt: noon},
		LastStatus:  422, DeadAt: now, WorkerID: "w-duplicate",
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetFloor(ctx, "x", "Payment", cassandra.Copy{Replay: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.store.MarkDeadLettered(ctx, "x", "Payment", "w-duplicate", now, 0); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	res, err := deadletter.Replay(ctx, e.store, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "after-commit", Now: e.clock.Now})
	if err != nil || res.Matched != 1 || res.Replayed != 0 || res.AlreadyDone != 1 {
		t.Fatalf("replay: %+v, %v; want the one dead letter counted as already done, none replayed", res, err)
	}
	if copies := e.copiesOf("x"); len(copies) != 0 {
		t.Fatalf("the replay left copies %v of x, want none", copies)
	}
	e.drainFor(3)
	if got := e.callsOf("x"); len(got) != 1 {
		t.Fatalf("x was called at generations %v, want once (before the duplicate was dead-lettered)", got)
	}
}

// TestReplayTakesADeadLetterWrittenUnderAnOlderMark: a replay marks a dead letter (a
// compare-and-set, stamped by its Paxos ballot: Cassandra's clock); then the step is given up on
// again the same day by a worker whose clock is 1 s behind Cassandra's, and its dead letter,
// written over the marked row after the mark, carries an older timestamp than the mark: the
// mark's cells survive the insert's nulls. The new dead letter reads as not replayed (the list,
// the serial read of its mark), and the next replay takes it.
func TestReplayTakesADeadLetterWrittenUnderAnOlderMark(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setRefused("a")
	e.record("a")
	e.drainFor(3)
	list, err := deadletter.List(ctx, e.store, e.filter())
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters %+v, %v; want a", list, err)
	}
	// The worker's clock, read before the replay: behind the mark's ballot, and ahead of the
	// first dead letter's timestamp (the env's writes lag the wall clock by the whole bound).
	behind := clocktest.New(time.Now().Add(-time.Second))
	res, err := deadletter.Replay(ctx, e.store, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "fix-1", Now: e.clock.Now})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("first replay: %+v, %v; want a replayed", res, err)
	}
	again := list[0]
	again.Transaction.Replay = 1
	again.DeadAt = list[0].DeadAt.Add(time.Minute).Truncate(time.Millisecond)
	again.LastError = "422 refused, generation 1"
	if err := e.store.WithWriteClock(behind).InsertDeadLetter(ctx, again); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)

	list, err = deadletter.List(ctx, e.store, e.filter())
	if err != nil || len(list) != 1 || list[0].Transaction.Replay != 1 {
		t.Fatalf("dead letters after the step was given up on again %+v, %v; want a's generation 1", list, err)
	}
	if d := list[0]; d.ReplayedBy != "" || !d.ReplayedAt.IsZero() {
		t.Errorf("a's generation 1 reads as replayed by %q at %v; the mark was for generation 0", d.ReplayedBy, d.ReplayedAt)
	}
	if by, current, err := e.store.ReplayMark(ctx, again); err != nil || by != "" || !current {
		t.Errorf("serial read of the mark of a's generation 1: by %q, current %v, %v; want unmarked and current", by, current, err)
	}
	res, err = deadletter.Replay(ctx, e.store, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "fix-2", Now: e.clock.Now})
	if err != nil || res.Replayed != 1 || res.AlreadyReplayed != 0 {
		t.Fatalf("second replay: %+v, %v; want a's generation 1 replayed, not skipped as replayed", res, err)
	}
	m, _, err := e.store.Marker(ctx, "a", "Payment")
	if err != nil || !m.HasFloor || m.Floor != (cassandra.Copy{Replay: 2}) {
		t.Fatalf("marker of a after the second replay: %+v, %v; want floor r2/a0", m, err)
	}
	e.setRefused()
	e.drainFor(3)
	if got := e.callsOf("a"); len(got) == 0 || got[len(got)-1] != 2 {
		t.Errorf("a was called at generations %v; want generation 2 last", got)
	}
}

// TestReplayMarkOfAnEarlierReleaseStillCounts: a mark written before the mark named its dead
// letter (no replayed_dead_at) reads as it did then: replayed, so no replay copies it again.
func TestReplayMarkOfAnEarlierReleaseStillCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.setRefused("a")
	e.record("a")
	e.drainFor(3)
	list, err := deadletter.List(ctx, e.store, e.filter())
	if err != nil || len(list) != 1 {
		t.Fatalf("dead letters %+v, %v; want a", list, err)
	}
	d := list[0]
	if err := e.session.Query(`UPDATE `+e.ks+`.es_dead_letters SET replayed_by = ?, replayed_at = ?
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ? AND transaction_id = ? AND stacksaga_impl_type = ? IF dead_at = ?`,
		"old-release", e.clock.Now(), "eu", "c1", "orders", d.DeadDay().Time(), d.Transaction.ID, d.Transaction.ImplType, d.DeadAt).
		WithContext(ctx).Exec(); err != nil {
		t.Fatal(err)
	}
	res, err := deadletter.Replay(ctx, e.store, e.recorder("deadletters-replay"), e.filter(), deadletter.ReplayOptions{ID: "fix-1", Now: e.clock.Now})
	if err != nil || res.Replayed != 0 || res.AlreadyReplayed != 1 {
		t.Fatalf("replay over a mark of an earlier release: %+v, %v; want it already replayed", res, err)
	}
}
