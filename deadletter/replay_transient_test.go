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
	"github.com/retryring/retryring/window"
)

// markFault is what busyStore does to one mark.
type markFault int

const (
	// casTimeoutApplied: the mark is written, then the answer is a CAS write timeout (the Paxos
	// proposal was accepted, the coordinator did not hear back in time).
	casTimeoutApplied markFault = iota + 1
	// casTimeoutNotApplied: a CAS write timeout and nothing written.
	casTimeoutNotApplied
	// noResponse: the client's own timeout, nothing written.
	noResponse
)

// casTimeout is the error Cassandra 5 answers a compare-and-set whose Paxos round timed out:
// "Operation timed out - received only 0 responses."
var casTimeout = &gocql.RequestErrWriteTimeout{Consistency: gocql.Consistency(gocql.LocalSerial), WriteType: "CAS"}

// busyStore is a Cassandra under load: the marks numbered in faults (from 1, in call order) and
// the first floor write of each step in floorTimeouts fail transiently.
type busyStore struct {
	*cassandra.Store
	faults        map[int]markFault
	floorTimeouts map[string]bool

	mu     sync.Mutex
	marks  int
	floors map[string]int
	reads  int // serial reads of a mark
}

func (b *busyStore) MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, id string, at time.Time) error {
	b.mu.Lock()
	b.marks++
	f := b.faults[b.marks]
	b.mu.Unlock()
	switch f {
	case casTimeoutApplied:
		if err := b.Store.MarkDeadLetterReplayed(ctx, d, id, at); err != nil {
			return err
		}
		return fmt.Errorf("cassandra: mark dead letter %s replayed: %w", d.Transaction.ID, casTimeout)
	case casTimeoutNotApplied:
		return fmt.Errorf("cassandra: mark dead letter %s replayed: %w", d.Transaction.ID, casTimeout)
	case noResponse:
		return fmt.Errorf("cassandra: mark dead letter %s replayed: %w", d.Transaction.ID, gocql.ErrTimeoutNoResponse)
	}
	return b.Store.MarkDeadLetterReplayed(ctx, d, id, at)
}

func (b *busyStore) SetFloor(ctx context.Context, id, span string, c cassandra.Copy, retention time.Duration) error {
	b.mu.Lock()
	if b.floors == nil {
		b.floors = map[string]int{}
	}
	b.floors[id]++
	fail := b.floorTimeouts[id] && b.floors[id] == 1
	b.mu.Unlock()
	if fail {
		return fmt.Errorf("cassandra: set floor of %s: %w", id, &gocql.RequestErrWriteTimeout{Consistency: gocql.LocalQuorum, WriteType: "SIMPLE"})
	}
	return b.Store.SetFloor(ctx, id, span, c, retention)
}

func (b *busyStore) ReplayMark(ctx context.Context, d cassandra.DeadLetter) (string, bool, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	return b.Store.ReplayMark(ctx, d)
}

// waits records the backoff of a replay instead of sleeping it.
type waits struct {
	mu sync.Mutex
	ds []time.Duration
}

func (w *waits) wait(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ds = append(w.ds, d)
	return nil
}

// TestReplaySurvivesTransientFailures: one replay through a busy Cassandra, one at a time so that
// the faults land on known dead letters: a floor write that times out, a mark whose CAS timed out
// after it was accepted, one that timed out before, one with no answer at all. The run does not
// stop: it tries each again after a backoff, settles the unknown marks by a serial read (the
// accepted one is not written again), and every dead letter ends marked, its step executed once.
func TestReplaySurvivesTransientFailures(t *testing.T) {
	e := newEnv(t)
	ids := []string{"a", "b", "c", "d", "e"}
	e.setRefused(ids...)
	e.record(ids...)
	e.drainFor(3)
	e.setRefused()
	rec := e.recorder("deadletters-replay")
	st := &busyStore{Store: e.store,
		faults:        map[int]markFault{1: casTimeoutApplied, 2: casTimeoutNotApplied, 5: noResponse},
		floorTimeouts: map[string]bool{"e": true}}
	var w waits
	res, err := deadletter.Replay(context.Background(), st, rec, e.filter(), deadletter.ReplayOptions{
		ID: "busy", Now: e.clock.Now, Concurrency: 1, Wait: w.wait})
	if err != nil || res.Replayed != len(ids) {
		t.Fatalf("replay through transient failures: %+v, %v; want all %d replayed", res, err, len(ids))
	}
	// Marks: a (applied, settled: 1 call), b (not applied, settled, tried again: 2 calls),
	// c (1), d (no answer, settled, tried again: 2), e (1).
	if st.marks != 7 || st.reads != 3 || res.Settled != 3 {
		t.Errorf("%d marks sent, %d serial reads, %d settled; want 7, 3, 3 (an accepted mark is not sent again)", st.marks, st.reads, res.Settled)
	}
	// Waits: before b's and d's second marks, before e's second floor write.
	if len(w.ds) != 3 || res.Retried != 3 {
		t.Errorf("waited %v, %d retried; want 3 backoffs", w.ds, res.Retried)
	}
	for _, d := range w.ds {
		if d <= 0 || d > time.Second {
			t.Errorf("backoff %v; want a short positive wait", d)
		}
	}
	list, _ := deadletter.List(context.Background(), e.store, e.filter())
	for _, d := range list {
		if d.ReplayedBy != "busy" {
			t.Errorf("dead letter %s marked %q, want busy", d.Transaction.ID, d.ReplayedBy)
		}
	}
	e.drainFor(3)
	for _, id := range ids {
		if got := e.callsOf(id); len(got) != 2 || got[1] != 1 {
			t.Errorf("%s was called at generations %v, want [0 1] (refused, then replayed once)", id, got)
		}
	}
	again, err := deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "busy", Now: e.clock.Now})
	if err != nil || again.Replayed != 0 || again.AlreadyReplayed != len(ids) {
		t.Fatalf("the same id again: %+v, %v; want nothing new", again, err)
	}
}

// TestReplayStopsOnAPersistentTimeoutSayingWhereAndHowManyLeft: a mark that times out on every try
// (never applied) stops the run after the tries, naming the dead letter and how many are left;
// the same id run again on a healthy Cassandra completes it.
func TestReplayStopsOnAPersistentTimeoutSayingWhereAndHowManyLeft(t *testing.T) {
	e := newEnv(t)
	ids := []string{"a", "b", "c"}
	e.setRefused(ids...)
	e.record(ids...)
	e.drainFor(3)
	e.setRefused()
	rec := e.recorder("deadletters-replay")
	const tries = 4
	st := &busyStore{Store: e.store, faults: map[int]markFault{}}
	for n := 2; n < 2+tries; n++ {
		st.faults[n] = casTimeoutNotApplied
	}
	var w waits
	res, err := deadletter.Replay(context.Background(), st, rec, e.filter(), deadletter.ReplayOptions{
		ID: "stuck", Now: e.clock.Now, Concurrency: 1, Tries: tries, Wait: w.wait})
	if !errors.Is(err, deadletter.ErrStopped) || !errors.Is(err, casTimeout) {
		t.Fatalf("replay against a mark that always times out: %v; want ErrStopped wrapping the timeout", err)
	}
	for _, want := range []string{"at dead letter b/Payment", "1 replayed, 2 of 3 left", "4 tries", "run it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if res.Replayed != 1 || len(w.ds) != tries-1 || st.reads != tries {
		t.Errorf("%+v, waited %v, %d serial reads; want 1 replayed, %d waits, %d reads", res, w.ds, st.reads, tries-1, tries)
	}
	res, err = deadletter.Replay(context.Background(), e.store, rec, e.filter(), deadletter.ReplayOptions{ID: "stuck", Now: e.clock.Now})
	if err != nil || res.Replayed != 2 || res.AlreadyReplayed != 1 {
		t.Fatalf("running stuck again: %+v, %v; want b and c replayed, a already", res, err)
	}
}

// partitionStore counts the marks in flight on each dead_day partition; the first mark stays in
// flight until every dead letter's floor is written (all the others are at their marks then), and
// a little longer for one of them to come in beside it.
type partitionStore struct {
	*cassandra.Store
	n int

	mu       sync.Mutex
	floors   int
	allFloor chan struct{}
	inFlight map[window.Date]int
	most     int
	entered  chan struct{}
}

func (p *partitionStore) SetFloor(ctx context.Context, id, span string, c cassandra.Copy, retention time.Duration) error {
	err := p.Store.SetFloor(ctx, id, span, c, retention)
	p.mu.Lock()
	if p.floors++; p.floors == p.n {
		close(p.allFloor)
	}
	p.mu.Unlock()
	return err
}

func (p *partitionStore) MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, id string, at time.Time) error {
	p.mu.Lock()
	p.inFlight[d.DeadDay()]++
	p.most = max(p.most, p.inFlight[d.DeadDay()])
	first := p.entered == nil
	if first {
		p.entered = make(chan struct{})
	} else if p.inFlight[d.DeadDay()] > 1 {
		select {
		case <-p.entered:
		default:
			close(p.entered)
		}
	}
	entered := p.entered
	p.mu.Unlock()
	if first {
		<-p.allFloor
		select {
		case <-entered:
		case <-time.After(200 * time.Millisecond): // none came in beside it: they wait their turn
		}
	}
	defer func() {
		p.mu.Lock()
		p.inFlight[d.DeadDay()]--
		p.mu.Unlock()
	}()
	return p.Store.MarkDeadLetterReplayed(ctx, d, id, at)
}

// TestReplayMarksOneAtATimePerPartition: every dead letter of a day lives in one partition, whose
// Paxos rounds contend when sent at once (under load the losers time out: what stopped replays).
// With 8 replays in flight, the marks of one day's partition still go one at a time.
func TestReplayMarksOneAtATimePerPartition(t *testing.T) {
	e := newEnv(t)
	ids := []string{"a", "b", "c", "d", "e", "f"}
	e.setRefused(ids...)
	e.record(ids...)
	e.drainFor(3)
	e.setRefused()
	st := &partitionStore{Store: e.store, n: len(ids), allFloor: make(chan struct{}), inFlight: map[window.Date]int{}}
	res, err := deadletter.Replay(context.Background(), st, e.recorder("deadletters-replay"), e.filter(),
		deadletter.ReplayOptions{ID: "one-by-one", Now: e.clock.Now, Concurrency: 8})
	if err != nil || res.Replayed != len(ids) {
		t.Fatalf("replay: %+v, %v; want all replayed", res, err)
	}
	if st.most != 1 {
		t.Errorf("%d marks in flight at once on one dead_day partition; want 1", st.most)
	}
}

// purgingStore purges each dead letter just before its mark, whose answer is then a CAS timeout.
type purgingStore struct{ *cassandra.Store }

func (p purgingStore) MarkDeadLetterReplayed(ctx context.Context, d cassandra.DeadLetter, _ string, _ time.Time) error {
	if err := p.DeleteDeadLetter(ctx, d); err != nil {
		return err
	}
	return casTimeout
}

// TestReplayMarkTimedOutOnAPurgedRowIsUnmarked: the serial read after a mark's timeout finds the
// row gone: the copy stands, the dead letter is reported copied_unmarked, nothing is tried again.
func TestReplayMarkTimedOutOnAPurgedRowIsUnmarked(t *testing.T) {
	e := newEnv(t)
	e.setRefused("a")
	e.record("a")
	e.drainFor(3)
	e.setRefused()
	var w waits
	res, err := deadletter.Replay(context.Background(), purgingStore{e.store}, e.recorder("deadletters-replay"), e.filter(),
		deadletter.ReplayOptions{ID: "purged", Now: e.clock.Now, Wait: w.wait})
	if err != nil || res.Unmarked != 1 || res.Settled != 1 || len(w.ds) != 0 {
		t.Fatalf("replay: %+v, %v, waited %v; want a copied unmarked after one serial read, no retry", res, err, w.ds)
	}
	e.drainFor(3)
	if got := e.callsOf("a"); len(got) != 2 || got[1] != 1 {
		t.Errorf("a was called at generations %v, want [0 1]", got)
	}
}
