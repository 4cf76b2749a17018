package demo

import (
	"net/http"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/window"
)

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

func mustWindow(t *testing.T, at time.Time) window.Window {
	t.Helper()
	w, err := window.Of(at, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// execution builds a finished execution of tx found in w, answered status, arriving at seq.
func execution(seq uint64, tx, worker string, w window.Window, status int) downstream.Execution {
	start := t0.Add(time.Duration(seq) * time.Millisecond)
	return downstream.Execution{
		Seq:     seq,
		Request: downstream.Request{TransactionID: tx, InstanceID: "orders-pod-0", ImplType: "Payment"},
		Call:    downstream.Call{WorkerID: worker, LeaseEpoch: 1, WindowDate: w.Day.String(), WindowMinute: w.Minute},
		Start:   start, End: start.Add(time.Microsecond), Status: status,
	}
}

func TestAccountSplitsEveryWindow(t *testing.T) {
	w1 := mustWindow(t, t0)
	w2 := w1.Next()
	in := ledgerInput{
		Now: t0.Add(30 * time.Second), Offset: 2 * time.Second, Length: 1,
		Own: map[window.Window][]string{w1: {"a", "b", "c", "d", "e"}},
		// b and c failed transiently in w1 and were recorded again into w2.
		Seen: map[window.Window]map[string]bool{w2: {"b": true, "c": true}},
		Execs: []downstream.Execution{
			execution(1, "a", "w1", w1, http.StatusOK),
			execution(2, "b", "w1", w1, http.StatusServiceUnavailable),
			execution(3, "c", "w1", w1, http.StatusServiceUnavailable),
			execution(4, "d", "w1", w1, http.StatusUnprocessableEntity),
			execution(5, "b", "w2", w2, http.StatusOK),
		},
		Dead: map[string]deadLetter{"d": {Window: w1, LastStatus: 422, Attempts: 1}},
	}
	l := account(in)
	if len(l.Windows) != 2 {
		t.Fatalf("windows: %+v", l.Windows)
	}
	got1, got2 := l.Windows[0], l.Windows[1]
	want1 := WindowRow{Window: w1, Recorded: 5, Done: 1, Retried: 2, DeadLettered: 1, Pending: 1, Opens: w1.Start().Add(2 * time.Second)}
	want2 := WindowRow{Window: w2, Recorded: 2, Done: 1, Pending: 1, Opens: w2.Start().Add(2 * time.Second)}
	if got1 != want1 {
		t.Errorf("w1:\n got %+v\nwant %+v", got1, want1)
	}
	if got2 != want2 {
		t.Errorf("w2:\n got %+v\nwant %+v", got2, want2)
	}
	for _, r := range l.Windows {
		if r.Recorded != r.Pending+r.Done+r.Retried+r.DeadLettered {
			t.Errorf("%v: recorded %d is not the sum of its parts", r.Window, r.Recorded)
		}
	}
	// The burst: a and b done, d dead-lettered, c (waiting in w2) and e (never executed) not yet.
	if l.Recorded != 5 || l.Done != 2 || l.DeadLettered != 1 || l.Lost != 2 {
		t.Errorf("totals: recorded %d done %d dead %d lost %d", l.Recorded, l.Done, l.DeadLettered, l.Lost)
	}
	if l.Fraction() != 3.0/5 {
		t.Errorf("fraction %v", l.Fraction())
	}
	if l.Executions != 5 || l.ByStatus[503] != 2 || l.ByStatus[200] != 2 || l.ByStatus[422] != 1 {
		t.Errorf("executions %d by status %v", l.Executions, l.ByStatus)
	}
}

// After a kill -9 the next owner executes a step again: done twice, counted once as done, once
// as executed twice; a copy recorded again before the repeat succeeded is skipped in its window
// (its marker is COMMITTED), so it counts as done there, never as pending.
func TestAccountExecutedTwiceAndSkippedCopies(t *testing.T) {
	w1 := mustWindow(t, t0)
	w2 := w1.Next()
	in := ledgerInput{
		Now: w2.Start().Add(10 * time.Second), Offset: 2 * time.Second, Length: 1,
		Own:  map[window.Window][]string{w1: {"a", "b"}},
		Seen: map[window.Window]map[string]bool{w2: {"b": true}},
		Execs: []downstream.Execution{
			execution(1, "a", "w1", w1, http.StatusOK),
			execution(2, "a", "w2", w1, http.StatusConflict), // the repeat after the kill
			execution(3, "b", "w1", w1, http.StatusServiceUnavailable),
			execution(4, "b", "w2", w1, http.StatusOK), // the kept bucket re-read: b succeeds in w1
		},
		Dead: map[string]deadLetter{},
	}
	l := account(in)
	if l.ExecutedTwice != 1 {
		t.Errorf("executed twice %d, want 1", l.ExecutedTwice)
	}
	if l.Lost != 0 || l.Done != 2 {
		t.Errorf("lost %d done %d", l.Lost, l.Done)
	}
	if r := l.Windows[1]; r.Window != w2 || r.Done != 1 || r.Pending != 0 {
		t.Errorf("w2 copy of a committed step: %+v", r)
	}
	if r := l.Windows[0]; r.Done != 2 || r.Retried != 0 {
		t.Errorf("w1: the last outcome counts: %+v", r)
	}
}

func TestAccountCountsContradictionsAndRunningCalls(t *testing.T) {
	w1 := mustWindow(t, t0)
	running := execution(2, "b", "w1", w1, 0)
	running.End = time.Time{}
	aborted := execution(3, "c", "w1", w1, 0)
	in := ledgerInput{
		Now: t0, Offset: 2 * time.Second, Length: 1,
		Own:   map[window.Window][]string{w1: {"a", "b", "c"}},
		Execs: []downstream.Execution{execution(1, "a", "w1", w1, http.StatusOK), running, aborted},
		Dead:  map[string]deadLetter{"a": {Window: w1}},
	}
	l := account(in)
	if l.DoneAndDead != 1 {
		t.Errorf("done and dead %d, want 1", l.DoneAndDead)
	}
	if l.ByStatus[-1] != 1 || l.ByStatus[0] != 1 {
		t.Errorf("by status %v: want one under way (-1) and one aborted (0)", l.ByStatus)
	}
	if r := l.Windows[0]; r.Pending != 2 {
		t.Errorf("a call under way and an aborted one are pending: %+v", r)
	}
	if l.Lost != 2 {
		t.Errorf("lost %d, want 2 (b and c have no end yet)", l.Lost)
	}
}

func TestAccountFlagsInterleavings(t *testing.T) {
	w1 := mustWindow(t, t0)
	a := execution(1, "a", "w1", w1, http.StatusOK)
	b := execution(2, "b", "w2", w1, http.StatusOK)
	a.End = b.Start.Add(time.Millisecond) // w1 still executing the instance when w2 starts on it
	l := account(ledgerInput{Length: 1, Own: map[window.Window][]string{w1: {"a", "b"}}, Execs: []downstream.Execution{a, b}})
	if l.Interleavings == 0 {
		t.Error("an overlap of two workers on one instance was not counted")
	}
}

// A transaction refused for good in two windows (its bucket re-run after a kill, and its copy)
// has one dead letter, naming the later window; both windows count it as dead-lettered.
func TestAccountDeadLetterOverwrittenByACopy(t *testing.T) {
	w1 := mustWindow(t, t0)
	w2 := w1.Next()
	l := account(ledgerInput{
		Length: 1, Offset: 2 * time.Second,
		Own:  map[window.Window][]string{w1: {"f"}},
		Seen: map[window.Window]map[string]bool{w2: {"f": true}},
		Execs: []downstream.Execution{
			execution(1, "f", "w1", w1, http.StatusServiceUnavailable),
			execution(2, "f", "w2", w1, http.StatusUnprocessableEntity),
			execution(3, "f", "w2", w2, http.StatusUnprocessableEntity),
		},
		Dead: map[string]deadLetter{"f": {Window: w2}},
	})
	for _, r := range l.Windows {
		if r.DeadLettered != 1 || r.Pending != 0 {
			t.Errorf("%v: %+v", r.Window, r)
		}
	}
	if l.FailedTransiently != 1 || l.TransientAnswers != 1 || l.DeadLettered != 1 || l.Lost != 0 {
		t.Errorf("totals: %+v", l)
	}
}

// A copy, in a window not open yet, of a transaction dead-lettered from an earlier window is
// accounted as dead-lettered: its fate is known (it is refused again when its window opens).
func TestAccountCopyOfADeadLetter(t *testing.T) {
	w1 := mustWindow(t, t0)
	w3 := w1.Add(3)
	l := account(ledgerInput{
		Length: 1, Offset: 2 * time.Second,
		Own:  map[window.Window][]string{w1: {"g"}},
		Seen: map[window.Window]map[string]bool{w3: {"g": true}},
		Execs: []downstream.Execution{
			execution(1, "g", "w1", w1, http.StatusServiceUnavailable),
			execution(2, "g", "w2", w1, http.StatusUnprocessableEntity),
		},
		Dead: map[string]deadLetter{"g": {Window: w1}},
	})
	if r := l.Windows[1]; r.Window != w3 || r.DeadLettered != 1 || r.Pending != 0 {
		t.Errorf("copy of a dead letter: %+v", r)
	}
}
