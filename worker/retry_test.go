package worker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// TestTransientsComeBackAndPermanentsAreDeadLettered: a transient failure is recorded again
// into a later window, attempt+1, and runs there; one that keeps failing is dead-lettered after
// MaxAttempts executions; a permanent failure is dead-lettered at once; nothing is left behind.
func TestTransientsComeBackAndPermanentsAreDeadLettered(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 700)
	e.record("pod-a", w, 10, "ok", "third-time", "permanent", "never")
	e.record("pod-b", w, 10, "b-third-time")

	ex := &recordingExecutor{answer: func(task Task, before int) Outcome {
		unavailable := Outcome{Kind: Transient, Status: 503, Err: errors.New("503 Service Unavailable")}
		switch task.TransactionID {
		case "third-time", "b-third-time":
			if before < 2 {
				return unavailable
			}
		case "permanent":
			return Outcome{Kind: Permanent, Status: 422, Err: errors.New("422 Unprocessable Entity")}
		case "never":
			return unavailable
		}
		return Outcome{Kind: Done, Status: 200}
	}}
	cfg := e.config("w0")
	cfg.MaxAttempts = 3
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, 24*time.Hour), ex)

	// Each round drains what is readable, then moves the clock past every retry delay.
	for round := 0; round < 6; round++ {
		drain(t, sc, 4)
		e.clock.Advance(10 * time.Minute)
	}
	drain(t, sc, 4)

	byTx := map[string][]Task{}
	for _, task := range ex.all() {
		byTx[task.TransactionID] = append(byTx[task.TransactionID], task)
	}
	wantRuns := map[string]int{"ok": 1, "third-time": 3, "b-third-time": 3, "permanent": 1, "never": 3}
	for id, n := range wantRuns {
		runs := byTx[id]
		if len(runs) != n {
			t.Errorf("%s ran %d times, want %d", id, len(runs), n)
			continue
		}
		for i, task := range runs {
			if task.Attempt != i {
				t.Errorf("%s run %d carried attempt %d, want %d", id, i, task.Attempt, i)
			}
			if i > 0 && task.Window.Compare(runs[i-1].Window) <= 0 {
				t.Errorf("%s run %d came from %s, not later than %s", id, i, task.Window, runs[i-1].Window)
			}
			if task.InstanceID != runs[0].InstanceID {
				t.Errorf("%s was re-recorded under %s, not its own instance %s", id, task.InstanceID, runs[0].InstanceID)
			}
		}
	}
	// The first retry of a failure from window w at attempt 0 comes L×2^0 minutes later or
	// more (a window that starts too soon for the writes is pushed one further).
	if r := byTx["third-time"]; len(r) == 3 && r[1].Window.Start().Before(w.Start().Add(time.Minute)) {
		t.Errorf("first retry in %s, before one window after %s", r[1].Window, w)
	}
	for _, id := range []string{"ok", "third-time", "b-third-time"} {
		if m, ok := e.marker(id); !ok || m.State != cassandra.MarkerCommitted {
			t.Errorf("%s: marker %+v, %v; want COMMITTED", id, m, ok)
		}
	}

	for _, id := range []string{"permanent", "never"} {
		if m, ok := e.marker(id); !ok || m.State != cassandra.MarkerDeadLettered {
			t.Errorf("%s: marker %+v, %v; want DEAD_LETTERED", id, m, ok)
		}
	}

	var dead []cassandra.DeadLetter
	for d := window.DateOf(noon); !d.After(window.DateOf(e.clock.Now())); d = d.AddDays(1) {
		ds, err := e.store.ListDeadLetters(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, ds...)
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].Transaction.ID < dead[j].Transaction.ID })
	if len(dead) != 2 || dead[0].Transaction.ID != "never" || dead[1].Transaction.ID != "permanent" {
		t.Fatalf("dead letters %+v; want never and permanent", dead)
	}
	if d := dead[0]; d.LastStatus != 503 || d.Transaction.Attempt != 3 || d.LastError == "" || d.WorkerID != "w0" ||
		d.Bucket.InstanceID != "pod-a" || d.Transaction.ImplType != "Payment" || d.Transaction.AllocationKey != "k-never" {
		t.Errorf("dead letter of never: %+v", d)
	}
	if d := dead[1]; d.LastStatus != 422 || d.Transaction.Attempt != 1 || d.Bucket.Window != w {
		t.Errorf("dead letter of permanent: %+v", d)
	}
	s := sc.Stats()
	if s.DeadLettered != 2 || s.Rerecorded != 6 || s.Transient != 7 || s.Permanent != 1 || s.BucketsKept != 0 {
		t.Errorf("stats %+v", s)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestDeadLetteredCopyIsNotExecutedAgain: a step given up on is not executed again from a copy of
// its row still in the directory (what a re-recording leaves when its source bucket is kept, or a
// failure recorded twice): the copy finishes on the DEAD_LETTERED marker, without a call, and its
// bucket goes. Without the marker the downstream would see the refused call once per copy.
func TestDeadLetteredCopyIsNotExecutedAgain(t *testing.T) {
	e := newEnv(t, 1, noon)
	day := window.DateOf(noon)
	first, copyOf := e.win(day, 725), e.win(day, 728)
	e.record("pod-a", first, 10, "refused", "ok-1")
	e.record("pod-a", copyOf, 10, "refused", "ok-2")
	ex := &recordingExecutor{answer: func(task Task, _ int) Outcome {
		if task.TransactionID == "refused" {
			return Outcome{Kind: Permanent, Status: 422, Err: errors.New("422 Unprocessable Entity")}
		}
		return Outcome{Kind: Done, Status: 200}
	}}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, 24*time.Hour), ex)

	// The first window alone is readable: the refusal is dead-lettered there.
	e.clock.Set(first.End().Add(DefaultMaxClockOffset + time.Second))
	drain(t, sc, 4)
	if m, ok := e.marker("refused"); !ok || m.State != cassandra.MarkerDeadLettered || m.Owner != "w0" {
		t.Fatalf("marker after the dead letter: %+v, %v; want DEAD_LETTERED by w0", m, ok)
	}
	// Then the copy's window opens.
	e.clock.Set(copyOf.End().Add(DefaultMaxClockOffset + time.Second))
	drain(t, sc, 4)

	if runs := ex.runs(); runs["refused"] != 1 || runs["ok-1"] != 1 || runs["ok-2"] != 1 {
		t.Errorf("executions %v; want refused, ok-1 and ok-2 once each", runs)
	}
	s := sc.Stats()
	if s.DeadLettered != 1 || s.SkippedSuperseded != 1 || s.BucketsKept != 0 {
		t.Errorf("stats %+v; want 1 dead-lettered, 1 copy finished on its floor, no bucket kept", s)
	}
	dead, err := e.store.ListDeadLetters(context.Background(), window.DateOf(e.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Transaction.ID != "refused" || dead[0].Bucket.Window != first {
		t.Errorf("dead letters %+v; want the one of refused from %s", dead, first)
	}
	e.assertDrained(DefaultMaxClockOffset)
}

// TestStepPolicyAndRetryAfter: a step's own policy decides its attempts, and a 503 with
// Retry-After is recorded no earlier than the downstream asked (capped by the policy).
func TestStepPolicyAndRetryAfter(t *testing.T) {
	e := newEnv(t, 1, noon)
	w := e.win(window.DateOf(noon), 770)
	e.record("pod-a", w, 100, "later", "short-lived")
	set, err := retrypolicy.Parse("policy.yaml", []byte("default:\n  max_delay: 30m\nShip:\n  max_attempts: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	// record() writes ImplType Payment; short-lived is a Ship step, written by hand.
	if err := e.store.InsertTransaction(context.Background(), cassandra.BucketKey{Window: w, InstanceID: "pod-a"},
		cassandra.Transaction{ID: "short-lived", ImplType: "Ship", AddedAt: noon}); err != nil {
		t.Fatal(err)
	}
	ex := &recordingExecutor{answer: func(task Task, _ int) Outcome {
		return Outcome{Kind: Transient, Status: 503, Err: errors.New("503"), RetryAfter: 20 * time.Minute}
	}}
	cfg := e.config("w0")
	cfg.Policies = set
	sc := e.scanner(cfg, e.guard(fullRing(), 0, 1, 24*time.Hour), ex)
	e.clock.Set(w.End().Add(DefaultMaxClockOffset + time.Second))
	now := e.clock.Now()
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	copies := e.copiesOf("later") // the original's bucket is gone: every row in it finished
	var minute, attempt int
	if len(copies) != 1 {
		t.Fatalf("later has rows %v, want its copy alone", copies)
	}
	if _, err := fmt.Sscanf(copies[0], "minute %d r0/a%d", &minute, &attempt); err != nil || attempt != 1 {
		t.Fatalf("copy of later %q (%v); want attempt 1", copies[0], err)
	}
	if at := time.Date(now.Year(), now.Month(), now.Day(), 0, minute, 0, 0, time.UTC); at.Before(now.Add(20 * time.Minute).Truncate(time.Minute)) {
		t.Errorf("the copy of later is in minute %d (%s), before the Retry-After of 20 min from %s", minute, at, now)
	}
	dead, err := e.store.ListDeadLetters(context.Background(), window.DateOf(now))
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Transaction.ID != "short-lived" || dead[0].Transaction.Attempt != 1 {
		t.Errorf("dead letters %+v; want short-lived after its one attempt (Ship: max_attempts 1)", dead)
	}
}
