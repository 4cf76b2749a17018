package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// waitTTLBelow polls the marker of id until the part of it that finishes a row at c has less
// than d left (real time: Cassandra counts TTLs down); it fails the test after a bound.
func waitTTLBelow(t *testing.T, e *env, id string, c cassandra.Copy, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, ok := e.marker(id)
		if ok && m.Expiring(c, d) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("marker of %s still %+v after 30 s; want less than %v left", id, m, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestLongPauseCarriesKeptBucketsBeforeTheirMarkersExpire: invariants 7 and 9 through a pause.
// A bucket kept while the ring is paused holds a committed row and a superseded one whose markers
// near their expiry (a short TTL written here, as if the pause had lasted retention − 1 day), and
// a row that never ran. The pause stops every traversal but the pause sweep, an hour into the
// pause: it checks each row against its marker, carries the unfinished row unchanged into the next
// window and deletes the bucket, so the handled rows cannot run again once their markers expire.
// Nothing is executed and no marker is written while paused; after the resume the carried row
// runs once, at attempt 0, and the handled ones never.
func TestLongPauseCarriesKeptBucketsBeforeTheirMarkersExpire(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 790)
	e.record("pod-a", w, 100, "committed", "superseded", "held")
	ctx := context.Background()
	short := carryMargin + 3*time.Second
	if err := e.store.MarkCommitted(ctx, "committed", "Payment", "w9", noon, short); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetFloor(ctx, "superseded", "Payment", cassandra.Copy{Attempt: 1}, short); err != nil {
		t.Fatal(err)
	}
	waitTTLBelow(t, e, "committed", cassandra.Copy{}, carryMargin)
	waitTTLBelow(t, e, "superseded", cassandra.Copy{}, carryMargin)

	g := e.guard(fullRing(), 0, 1, 24*time.Hour)
	setControls(g, &lease.Controls{Paused: true})
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), g, ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))

	// The pause has just begun: nothing is read.
	before := e.store.Statements()
	res, err := sc.Cycle(ctx)
	if err != nil || !res.Paused || res.Swept || res.Windows != 0 {
		t.Fatalf("first paused cycle: %+v, %v; want paused, no sweep", res, err)
	}
	e.clock.Advance(DefaultPauseSweepEvery - time.Second)
	if res, err := sc.Cycle(ctx); err != nil || res.Swept || e.store.Statements() != before {
		t.Fatalf("paused cycle before the sweep is due: %+v, %v, %d queries; want none", res, err, e.store.Statements()-before)
	}

	e.clock.Advance(time.Second)
	res, err = sc.Cycle(ctx)
	if err != nil || !res.Paused || !res.Swept {
		t.Fatalf("the sweep an hour into the pause: %+v, %v", res, err)
	}
	st := res.Stats
	if st.Carried != 1 || st.SkippedCommitted != 1 || st.SkippedSuperseded != 1 || st.BucketsDeleted != 1 || st.PauseSweeps != 1 {
		t.Fatalf("sweep stats %+v; want held carried, the handled rows finished on their markers, the bucket deleted", st)
	}
	if n := len(ex.all()); n != 0 || st.Executed != 0 {
		t.Fatalf("%d executions during the pause, want none", n)
	}
	if m, ok := e.marker("held"); ok {
		t.Errorf("held has a marker %+v written during the pause", m)
	}
	if c := e.copiesOf("held"); len(c) != 1 || strings.HasPrefix(c[0], "minute 790 ") || !strings.HasSuffix(c[0], "r0/a0") {
		t.Fatalf("held is at %v; want one row at r0/a0 in a later window", c)
	}
	for _, id := range []string{"committed", "superseded"} {
		if c := e.copiesOf(id); len(c) != 0 {
			t.Errorf("%s still has rows %v after the sweep; want none (its bucket deleted)", id, c)
		}
	}
	// The next sweep is an hour away: the cycles between read nothing.
	before = e.store.Statements()
	if res, err := sc.Cycle(ctx); err != nil || res.Swept || e.store.Statements() != before {
		t.Fatalf("paused cycle right after the sweep: %+v, %v, %d queries; want none", res, err, e.store.Statements()-before)
	}

	setControls(g, &lease.Controls{}) // resumed
	for i := 0; i < 3; i++ {
		e.clock.Advance(time.Minute)
		drain(t, sc, 4)
	}
	if runs := ex.runs(); runs["held"] != 1 || runs["committed"] != 0 || runs["superseded"] != 0 {
		t.Errorf("executions after the resume %v; want held once, the handled rows never", runs)
	}
	if all := ex.all(); len(all) != 1 || all[0].Attempt != 0 {
		t.Errorf("tasks %+v; want held alone, at attempt 0 (no attempt used while paused)", all)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestPauseSweepObeysTheGuard: a sweep that falls due once the lease has run out reads nothing:
// the guard refuses its first query like any other.
func TestPauseSweepObeysTheGuard(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 800)
	e.record("pod-a", w, 100, "held")
	g := e.guard(fullRing(), 0, 1, 90*time.Minute) // from noon: it runs out at 13:30
	setControls(g, &lease.Controls{Paused: true})
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), g, ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(DefaultPauseSweepEvery) // 14:11: the lease ran out at 13:30
	before := e.store.Statements()
	res, err := sc.Cycle(context.Background())
	if !res.Swept || !lease.IsGuardError(err) {
		t.Fatalf("sweep under an expired lease: %+v, %v; want the sweep stopped by the guard", res, err)
	}
	if n := e.store.Statements() - before; n != 0 || len(ex.all()) != 0 {
		t.Fatalf("%d queries and %d executions under an expired lease, want none", n, len(ex.all()))
	}
}
