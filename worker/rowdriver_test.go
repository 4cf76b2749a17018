package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// rowStore is an in-memory stand-in for the queries one row runs: it answers the marker it holds
// and writes down every query, so that a test sees which statements runRow ran, in which order.
// The embedded Store is nil: a query a row must not run panics.
type rowStore struct {
	Store
	mu      sync.Mutex
	marker  cassandra.Marker
	found   bool
	calls   []string
	failing map[string]int // query name -> failures left
	onRead  func()         // called as the marker is read
}

func (s *rowStore) call(name, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing[name] > 0 {
		s.failing[name]--
		s.calls = append(s.calls, what+" (failed)")
		return errors.New("query timed out")
	}
	s.calls = append(s.calls, what)
	return nil
}

func (s *rowStore) Marker(context.Context, string, string) (cassandra.Marker, bool, error) {
	if s.onRead != nil {
		s.onRead()
	}
	return s.marker, s.found, s.call("marker", "read marker")
}

func (s *rowStore) MarkInProgress(_ context.Context, id, span, owner string, _ time.Time, _ time.Duration) error {
	return s.call("in_progress", fmt.Sprintf("IN_PROGRESS %s/%s by %s", id, span, owner))
}

func (s *rowStore) MarkCommitted(_ context.Context, id, span, owner string, _ time.Time, _ time.Duration) error {
	return s.call("committed", fmt.Sprintf("COMMITTED %s/%s by %s", id, span, owner))
}

func (s *rowStore) MarkDeadLettered(_ context.Context, id, span, owner string, _ time.Time, _ time.Duration) error {
	return s.call("dead_lettered", fmt.Sprintf("DEAD_LETTERED %s/%s by %s", id, span, owner))
}

func (s *rowStore) SetFloor(_ context.Context, id, span string, c cassandra.Copy, _ time.Duration) error {
	return s.call("floor", fmt.Sprintf("floor %s/%s %s", id, span, c))
}

func (s *rowStore) InsertDeadLetter(_ context.Context, d cassandra.DeadLetter) error {
	return s.call("dead_letter", fmt.Sprintf("dead letter %s attempts %d status %d error %q", d.Transaction.ID, d.Transaction.Attempt, d.LastStatus, d.LastError))
}

func (s *rowStore) InsertDay(_ context.Context, d window.Date) error {
	return s.call("day", "day "+d.String())
}

func (s *rowStore) InsertWindow(_ context.Context, w window.Window) error {
	return s.call("window", "window "+w.String())
}

func (s *rowStore) InsertInstance(_ context.Context, w window.Window, instanceID string) error {
	return s.call("instance", "instance "+instanceID+" in "+w.String())
}

func (s *rowStore) InsertBucket(_ context.Context, w window.Window, instanceID string, bucket int) error {
	return s.call("bucket", fmt.Sprintf("bucket %d of %s in %s", bucket, instanceID, w))
}

func (s *rowStore) InsertTransaction(_ context.Context, b cassandra.BucketKey, t cassandra.Transaction) error {
	return s.call("transaction", fmt.Sprintf("row %s %s into %s", t.ID, t.Copy(), b.Window))
}

// TestRunRowRunsTheStatementsTheCoreAnswers drives runRow against an in-memory store, an executor
// answering a fixed outcome and a lease on a manual clock: the driver runs, in order, the
// statements the transcripts show the core answering, and reports the row as they say.
func TestRunRowRunsTheStatementsTheCoreAnswers(t *testing.T) {
	now := time.Date(2026, 12, 7, 11, 0, 30, 0, time.UTC)
	copyTo := "2026-12-07/661+1m"
	cases := []struct {
		name     string
		marker   *cassandra.Marker // nil: none
		out      Outcome
		failing  map[string]int
		finished bool
		err      error
		calls    []string
	}{
		{name: "done", out: Outcome{Kind: Done, Status: 200}, finished: true,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1", "COMMITTED tx-1/Payment by w1"}},
		{name: "commit tried again", out: Outcome{Kind: Done, Status: 200}, failing: map[string]int{"committed": 1}, finished: true,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1", "COMMITTED tx-1/Payment by w1 (failed)", "COMMITTED tx-1/Payment by w1"}},
		{name: "commit failing every try", out: Outcome{Kind: Done, Status: 200}, failing: map[string]int{"committed": settleTries}, err: errQueryTimedOut,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1", "COMMITTED tx-1/Payment by w1 (failed)", "COMMITTED tx-1/Payment by w1 (failed)", "COMMITTED tx-1/Payment by w1 (failed)"}},
		{name: "transient", out: Outcome{Kind: Transient, Status: 503}, finished: true,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1", "day 2026-12-07", "window " + copyTo, "instance pod-a in " + copyTo,
				"bucket 0 of pod-a in " + copyTo, "row tx-1 r0/a1 into " + copyTo, "floor tx-1/Payment r0/a1"}},
		{name: "permanent", out: Outcome{Kind: Permanent, Status: 400, Err: errors.New("bad request")}, finished: true,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1", `dead letter tx-1 attempts 1 status 400 error "bad request"`,
				"floor tx-1/Payment r1/a0", "DEAD_LETTERED tx-1/Payment by w1"}},
		{name: "not sent", out: Outcome{Kind: NotSent}, err: errNotSent,
			calls: []string{"read marker", "IN_PROGRESS tx-1/Payment by w1"}},
		{name: "committed", marker: &cassandra.Marker{State: cassandra.MarkerCommitted}, finished: true,
			calls: []string{"read marker"}},
		{name: "in progress elsewhere", marker: &cassandra.Marker{State: cassandra.MarkerInProgress, InProgressOwner: "w2"}, err: errElsewhere,
			calls: []string{"read marker"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := clocktest.New(now)
			g := lease.NewGuard(clock, 100*time.Millisecond)
			g.Set(lease.Lease{WorkerID: "w1", Epoch: 1, NodeCount: 1, Ranges: fullRing(), TTL: time.Minute, ValidFrom: now})
			store := &rowStore{failing: c.failing}
			if c.marker != nil {
				store.marker, store.found = *c.marker, true
			}
			sc, run := rowScanner(t, clock, store, g, c.out)
			finished, err := sc.runRow(context.Background(), run, cassandra.Transaction{ID: "tx-1", ImplType: "Payment"})
			if finished != c.finished || !sameError(err, c.err) {
				t.Errorf("runRow = %v, %v; want %v, %v", finished, err, c.finished, c.err)
			}
			if !reflect.DeepEqual(store.calls, c.calls) {
				t.Errorf("statements:\n%q\nwant\n%q", store.calls, c.calls)
			}
		})
	}
}

// errQueryTimedOut stands for rowStore's failure, which is not a sentinel.
var errQueryTimedOut = errors.New("query timed out")

func sameError(got, want error) bool {
	if errors.Is(want, errQueryTimedOut) {
		return got != nil && got.Error() == want.Error()
	}
	return errors.Is(got, want)
}

// TestRunRowRefusesANewEpochSinceTheMarkerRead: the assignment changes while the marker is read;
// IN_PROGRESS is refused by the guard with an error naming both epochs, and nothing is written.
func TestRunRowRefusesANewEpochSinceTheMarkerRead(t *testing.T) {
	now := time.Date(2026, 12, 7, 11, 0, 30, 0, time.UTC)
	clock := clocktest.New(now)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	l := lease.Lease{WorkerID: "w1", Epoch: 1, NodeCount: 1, Ranges: fullRing(), TTL: time.Minute, ValidFrom: now}
	g.Set(l)
	store := &rowStore{onRead: func() {
		l.Epoch = 2
		g.Set(l)
	}}
	sc, run := rowScanner(t, clock, store, g, Outcome{Kind: Done})
	finished, err := sc.runRow(context.Background(), run, cassandra.Transaction{ID: "tx-1", ImplType: "Payment"})
	if finished || !errors.Is(err, lease.ErrTokenNotLeased) || err.Error() != "lease: token not in the current lease: epoch 2 since the marker was read under 1" {
		t.Fatalf("runRow = %v, %v; want a refusal naming epochs 2 and 1", finished, err)
	}
	if want := []string{"read marker"}; !reflect.DeepEqual(store.calls, want) {
		t.Fatalf("statements %q, want %q", store.calls, want)
	}
	if st := sc.Stats(); st.GuardRefusals != 1 || st.Executed != 0 {
		t.Fatalf("stats %+v: want one guard refusal, no execution", st)
	}
}

// rowScanner builds a Scanner of worker w1 on store and g whose executor answers out, and the run
// of bucket 0 of pod-a in window 11:00 of the clock's day.
func rowScanner(t *testing.T, clock *clocktest.Manual, store Store, g Guard, out Outcome) (*Scanner, *bucketRun) {
	t.Helper()
	cfg := Config{Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "w1", Clock: clock,
		QueryTimeout: time.Second, ExecTimeout: time.Second}
	sc, err := New(cfg, store, g, ExecutorFunc(func(context.Context, Task) Outcome { return out }))
	if err != nil {
		t.Fatal(err)
	}
	w, err := window.New(window.DateOf(clock.Now()), 660, 1)
	if err != nil {
		t.Fatal(err)
	}
	key := cassandra.BucketKey{Window: w, InstanceID: "pod-a"}
	return sc, &bucketRun{key: key, token: cassandra.Token("pod-a")}
}
