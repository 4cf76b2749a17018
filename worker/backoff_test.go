package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
)

// Invariant 9, backoff holds: a row that was recorded again, dead-lettered or committed is never
// executed again, whatever keeps its bucket; a transaction is not called again before the window
// its backoff chose. These tests keep a bucket the way production does (a failed write, an
// execution that died mid-call) and count the calls the downstream would see.

// faultyStore fails chosen writes for chosen transactions, as a Cassandra that times out would.
type faultyStore struct {
	*cassandra.Store
	mu   sync.Mutex
	left map[string]int // "op/transaction" -> failures left; negative: every time
}

var errInjected = errors.New("injected write failure")

func newFaultyStore(s *cassandra.Store) *faultyStore {
	return &faultyStore{Store: s, left: map[string]int{}}
}

// failOn makes op fail n times for transaction id (n < 0: until heal).
func (f *faultyStore) failOn(op, id string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left[op+"/"+id] = n
}

func (f *faultyStore) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.left)
}

func (f *faultyStore) fails(op, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.left[op+"/"+id]
	switch {
	case !ok || n == 0:
		return false
	case n > 0:
		f.left[op+"/"+id] = n - 1
	}
	return true
}

func (f *faultyStore) MarkInProgress(ctx context.Context, id, span, owner string, at time.Time, ttl time.Duration) error {
	if f.fails("in_progress", id) {
		return errInjected
	}
	return f.Store.MarkInProgress(ctx, id, span, owner, at, ttl)
}

func (f *faultyStore) MarkCommitted(ctx context.Context, id, span, owner string, at time.Time, retention time.Duration) error {
	if f.fails("committed", id) {
		return errInjected
	}
	return f.Store.MarkCommitted(ctx, id, span, owner, at, retention)
}

func (f *faultyStore) SetFloor(ctx context.Context, id, span string, c cassandra.Copy, retention time.Duration) error {
	if f.fails("floor", id) {
		return errInjected
	}
	return f.Store.SetFloor(ctx, id, span, c, retention)
}

func (f *faultyStore) InsertTransaction(ctx context.Context, b cassandra.BucketKey, t cassandra.Transaction) error {
	if f.fails("copy", t.ID) {
		return errTimedOut
	}
	return f.Store.InsertTransaction(ctx, b, t)
}

// errTimedOut is what a write in flight while its worker was stalled (SIGSTOP, a long GC pause)
// returns when the worker resumes: the driver's timer fired during the stall, before the answer
// that sat in the socket was read.
var errTimedOut = errors.New("gocql: no response received from cassandra within timeout period")

// scannerOn is a scanner of cfg on store, holding the whole ring for a day.
func (e *env) scannerOn(store Store, cfg Config, ex Executor) *Scanner {
	e.t.Helper()
	sc, err := New(cfg, store, e.guard(fullRing(), 0, 1, 24*time.Hour), ex)
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

// copiesOf lists the tier-5 rows of a transaction anywhere in the keyspace (a test-only scan).
func (e *env) copiesOf(id string) []string {
	e.t.Helper()
	iter := e.session.Query("SELECT minute_of_day, attempt, replay FROM "+e.ks+
		".es_retry_transactions_by_instance WHERE transaction_id = ? ALLOW FILTERING", id).Iter()
	var out []string
	var minute, attempt int
	var replay *int
	for iter.Scan(&minute, &attempt, &replay) {
		r := 0
		if replay != nil {
			r = *replay
		}
		out = append(out, fmt.Sprintf("minute %d r%d/a%d", minute, r, attempt))
	}
	if err := iter.Close(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

func unavailable(Task, int) Outcome {
	return Outcome{Kind: Transient, Status: 503, Err: errors.New("503 Service Unavailable")}
}

// TestKeptBucketIsNotExecutedAgainDuringAnOutage: during an outage every row of a bucket fails
// and is recorded again, but one row's write fails, so the bucket is kept. Passes over the kept
// bucket until the copies' windows open call the downstream for nobody and count as no progress;
// each copy then executes once, at its own window, and never before.
func TestKeptBucketIsNotExecutedAgainDuringAnOutage(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 720)
	rows := ids("tx", 20)
	e.record("pod-a", w, 100, rows...)
	store := newFaultyStore(e.store)
	store.failOn("in_progress", "tx-0", -1) // keeps the bucket: tx-0 never gets to run
	ex := &recordingExecutor{answer: unavailable}
	sc := e.scannerOn(store, e.config("w0"), ex)

	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	if n := len(ex.all()); n != 19 {
		t.Fatalf("first pass made %d calls, want 19 (every row but tx-0)", n)
	}
	// The outage goes on; the worker passes over the kept bucket again and again before the
	// copies' windows (a minute ahead at least) open.
	for pass := 0; pass < 3; pass++ {
		e.clock.Advance(10 * time.Second)
		res, err := sc.Cycle(context.Background())
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if n := len(ex.all()); n != 19 {
			t.Fatalf("pass %d over the kept bucket: %d calls in all, want still 19 (handled rows called again)", pass, n)
		}
		if res.Progress() {
			t.Errorf("pass %d counted as progress: %+v", pass, res.Stats)
		}
		if res.Stats.SkippedSuperseded != 19 || res.Stats.Rerecorded != 0 {
			t.Errorf("pass %d: %d rows finished on their floor, %d recorded again; want 19 and 0",
				pass, res.Stats.SkippedSuperseded, res.Stats.Rerecorded)
		}
	}
	for _, id := range rows[1:] {
		if c := e.copiesOf(id); len(c) != 2 {
			t.Fatalf("%s has rows %v, want the original and one copy", id, c)
		}
	}

	// The downstream recovers; the failed write heals. tx-0 runs, the bucket goes, and each copy
	// runs once when its own window opens.
	store.heal()
	ex.mu.Lock()
	ex.answer = nil
	ex.mu.Unlock()
	for i := 0; i < 8; i++ {
		drain(t, sc, 4)
		e.clock.Advance(time.Minute)
	}
	runs := ex.runs()
	for _, id := range rows {
		want := 2
		if id == "tx-0" {
			want = 1
		}
		if runs[id] != want {
			t.Errorf("%s ran %d times, want %d", id, runs[id], want)
		}
	}
	for _, task := range ex.all() {
		if task.Attempt == 0 {
			continue
		}
		if task.Window == w {
			t.Errorf("%s attempt %d ran from the original window %s", task.TransactionID, task.Attempt, w)
		}
		if task.Window.Start().Before(w.Start().Add(time.Minute / 2)) {
			t.Errorf("%s attempt %d came from %s, before its backoff allowed", task.TransactionID, task.Attempt, task.Window)
		}
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestCopyThatDiesMidCallDoesNotFreeTheOlderRow: a row's copy starts executing on another worker,
// which dies after the call (its IN_PROGRESS marker expires, its outcome is never written). The
// older row, still in its kept bucket, must not run: the floor lives in cells IN_PROGRESS never
// writes, so the marker's expiry cannot take it away.
func TestCopyThatDiesMidCallDoesNotFreeTheOlderRow(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 730)
	e.record("pod-a", w, 100, "x", "keeper")
	store := newFaultyStore(e.store)
	store.failOn("in_progress", "keeper", -1)
	ex := &recordingExecutor{answer: unavailable}
	short := e.config("w0")
	short.ExecTimeout, short.MarkerMargin = time.Second, time.Millisecond // IN_PROGRESS TTL 2 s
	sc := e.scannerOn(store, short, ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitMarkerState(t, e, "x", "") // w0's own IN_PROGRESS for the 503 call expired
	if m, ok := e.marker("x"); !ok || !m.HasFloor || m.Floor != (cassandra.Copy{Attempt: 1}) {
		t.Fatalf("marker of x after its re-recording: %+v, %v; want floor r0/a1", m, ok)
	}

	// Another worker runs the copy when its window opens and dies after the call: its COMMITTED
	// write never happens, and its IN_PROGRESS marker (short-lived here) expires.
	other := newFaultyStore(e.store)
	other.failOn("committed", "x", -1)
	otherEx := &recordingExecutor{}
	sc1 := e.scannerOn(other, func() Config { c := short; c.WorkerID = "w1"; return c }(), otherEx)
	e.clock.Advance(10 * time.Minute) // every window the backoff may pick for attempt 0 is open
	if _, err := sc1.Cycle(context.Background()); err != nil {
		t.Logf("the dying worker's pass: %v", err)
	}
	if got := otherEx.runs()["x"]; got != 1 {
		t.Fatalf("the copy ran %d times on the dying worker, want 1", got)
	}
	waitMarkerState(t, e, "x", "") // the IN_PROGRESS cells expired (real time: Cassandra's TTL)

	m, ok := e.marker("x")
	if !ok || !m.HasFloor || m.Floor != (cassandra.Copy{Attempt: 1}) {
		t.Fatalf("marker of x after the IN_PROGRESS expired: %+v, %v; want floor r0/a1 still", m, ok)
	}
	// w0 passes over its kept bucket again (w still holds x at attempt 0, and keeper).
	before := len(ex.all())
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, task := range ex.all()[before:] {
		if task.TransactionID == "x" && task.Attempt == 0 {
			t.Fatalf("the older row of x ran again after its copy's execution died: %+v", task)
		}
	}
}

// waitMarkerState polls the step's marker until its state reads want (a TTL expiring in real
// time); it fails the test after a bound.
func waitMarkerState(t *testing.T, e *env, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := e.marker(id)
		if m.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker of %s still %+v after 30 s, want state %q", id, m, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCrashBetweenCopyAndFloor: the copy of a failed row is written but its floor is not (the
// worker died, or the write failed every time it was tried). The row is then executed once more, which is the one
// exception invariant 9 allows, and leaves at most one more copy; both copies sit at the same
// place among the step's copies, so whichever runs first settles the other. Nothing is lost.
func TestCrashBetweenCopyAndFloor(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 740)
	e.record("pod-a", w, 100, "x")
	store := newFaultyStore(e.store)
	store.failOn("floor", "x", settleTries) // every try of the first pass
	ex := &recordingExecutor{answer: unavailable}
	sc := e.scannerOn(store, e.config("w0"), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Logf("pass with the failing floor write: %v", err)
	}
	e.clock.Advance(20 * time.Second) // a later pass, possibly choosing another window
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ex.runs()["x"]; got != 2 {
		t.Fatalf("x ran %d times from its first window, want 2 (once more after the lost floor)", got)
	}
	copies := e.copiesOf("x")
	if len(copies) > 2 {
		t.Fatalf("x has copies %v; want one or two", copies)
	}

	ex.mu.Lock()
	ex.answer = nil
	ex.mu.Unlock()
	for i := 0; i < 8; i++ {
		drain(t, sc, 4)
		e.clock.Advance(time.Minute)
	}
	if got := ex.runs()["x"]; got != 3 {
		t.Errorf("x ran %d times in all, want 3 (two from its first window, one copy)", got)
	}
	if m, ok := e.marker("x"); !ok || m.State != cassandra.MarkerCommitted {
		t.Errorf("marker of x: %+v, %v; want COMMITTED", m, ok)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestTimedOutSettlingWriteDoesNotRepeatTheCall: a row was called and answered 503, and one of
// the writes that record it again then timed out, as the writes in flight of a worker SIGSTOPped
// for a few seconds do when it resumes (figure 7's repeated attempts): here the floor of x and the
// tier-5 copy of y. The worker still holds its lease and still knows the answer, so the write is
// tried again and the row is finished; later passes over the bucket call nobody. Calling x or y
// again at the same attempt would be load on a service that is down, and not the crash invariant 9
// excuses.
func TestTimedOutSettlingWriteDoesNotRepeatTheCall(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 745)
	e.record("pod-a", w, 100, "x", "y", "z")
	store := newFaultyStore(e.store)
	store.failOn("floor", "x", 1)
	store.failOn("copy", "y", 1)
	ex := &recordingExecutor{answer: unavailable}
	sc := e.scannerOn(store, e.config("w0"), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	for pass := 0; pass < 3; pass++ {
		if _, err := sc.Cycle(context.Background()); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		e.clock.Advance(10 * time.Second) // still before any copy's window
	}
	for id, n := range ex.runs() {
		if n != 1 {
			t.Errorf("%s was called %d times at attempt 0 during the outage, want once (its settling write timed out once)", id, n)
		}
	}
	for _, id := range []string{"x", "y", "z"} {
		if m, ok := e.marker(id); !ok || !m.HasFloor || m.Floor != (cassandra.Copy{Attempt: 1}) {
			t.Errorf("marker of %s: %+v, %v; want its floor at r0/a1", id, m, ok)
		}
	}
	for _, id := range []string{"x", "y", "z"} {
		if c := e.copiesOf(id); len(c) != 1 || !strings.HasSuffix(c[0], "r0/a1") {
			t.Errorf("%s has rows %v; want only its copy at r0/a1 (the original bucket finished and deleted)", id, c)
		}
	}
}

// TestKeptBucketIsCarriedBeforeItsMarkersExpire: a bucket kept until the markers of its handled
// rows have less than a day left has its unfinished rows recorded again unchanged into the next
// window, and goes, so that no handled row can run again when its marker expires. The carried
// row then runs there, with its attempt unchanged; the handled one never runs again.
func TestKeptBucketIsCarriedBeforeItsMarkersExpire(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 750)
	e.record("pod-a", w, 100, "done-before", "stuck")
	retention := carryMargin + 3*time.Second
	if err := e.store.MarkCommitted(context.Background(), "done-before", "Payment", "w9", noon, retention); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // real time: Cassandra counts the TTL down
	for m, _ := e.marker("done-before"); m.StateTTL >= carryMargin; m, _ = e.marker("done-before") {
		if time.Now().After(deadline) {
			t.Fatalf("COMMITTED TTL still %v after 30 s", m.StateTTL)
		}
		time.Sleep(500 * time.Millisecond)
	}
	store := newFaultyStore(e.store)
	store.failOn("in_progress", "stuck", -1) // keeps the bucket
	ex := &recordingExecutor{}
	sc := e.scannerOn(store, e.config("w0"), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	res, err := sc.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Carried != 1 || res.Stats.SkippedCommitted != 1 || res.Stats.BucketsDeleted != 1 || res.Stats.BucketsKept != 0 {
		t.Fatalf("stats %+v; want stuck carried, done-before skipped as committed, the bucket deleted", res.Stats)
	}
	if c := e.copiesOf("stuck"); len(c) != 1 || c[0] == fmt.Sprintf("minute %d r0/a0", w.Minute) {
		t.Fatalf("stuck is at %v; want one row in a later window", c)
	}
	store.heal()
	for i := 0; i < 3; i++ {
		e.clock.Advance(time.Minute)
		drain(t, sc, 4)
	}
	if runs := ex.runs(); runs["stuck"] != 1 || runs["done-before"] != 0 {
		t.Errorf("executions %v; want stuck once, done-before never", runs)
	}
	if got := ex.all(); len(got) == 1 && got[0].Attempt != 0 {
		t.Errorf("the carried row ran with attempt %d, want 0 (no call was made when it was carried)", got[0].Attempt)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestDeadLetteredBeforeFloorsIsNotExecuted: a step marked DEAD_LETTERED by a release that wrote
// no floor is still finished without a call, so an upgrade does not run old dead letters again.
func TestDeadLetteredBeforeFloorsIsNotExecuted(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 760)
	e.record("pod-a", w, 100, "old-dead", "ok")
	if err := e.store.MarkDeadLettered(context.Background(), "old-dead", "Payment", "w9", noon, 0); err != nil {
		t.Fatal(err)
	}
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, 24*time.Hour), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	st := drain(t, sc, 4)
	if runs := ex.runs(); runs["old-dead"] != 0 || runs["ok"] != 1 {
		t.Errorf("executions %v; want ok once and old-dead never", runs)
	}
	if st.SkippedDeadLettered != 1 {
		t.Errorf("stats %+v; want the old dead letter finished on its state", st)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestCallNeverSentUsesNoAttempt: an execution the executor refused to send (past its deadline)
// is no outcome: the row stays, no copy is written, and a later pass runs it at the same attempt.
func TestCallNeverSentUsesNoAttempt(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 780)
	e.record("pod-a", w, 100, "x")
	ex := &recordingExecutor{answer: func(_ Task, before int) Outcome {
		if before == 0 {
			return Outcome{Kind: NotSent, Err: errors.New("fenced")}
		}
		return Outcome{Kind: Done, Status: 200}
	}}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, 24*time.Hour), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	res, err := sc.Cycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.NotSent != 1 || res.Stats.Executed != 0 || res.Stats.BucketsKept != 1 || len(e.copiesOf("x")) != 1 {
		t.Fatalf("after the unsent call: stats %+v, rows %v; want it counted NotSent, the bucket kept, no copy", res.Stats, e.copiesOf("x"))
	}
	drain(t, sc, 4)
	if all := ex.all(); len(all) != 2 || all[1].Attempt != 0 {
		t.Fatalf("tasks %+v; want x tried again at attempt 0", all)
	}
	e.assertDrained(DefaultMaxClockOffset)
}
