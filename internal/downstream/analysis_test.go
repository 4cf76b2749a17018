package downstream

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// ex builds an execution of instance by worker under epoch, from ms to ms (end < 0: running).
func ex(seq uint64, tx, instance, worker string, epoch uint64, startMs, endMs int, status int) Execution {
	e := Execution{Seq: seq, Request: Request{TransactionID: tx, InstanceID: instance}, Call: Call{WorkerID: worker, LeaseEpoch: epoch},
		Start: t0.Add(time.Duration(startMs) * time.Millisecond), Status: status}
	if endMs >= 0 {
		e.End = t0.Add(time.Duration(endMs) * time.Millisecond)
	}
	return e
}

func TestInterleavingsAllowsAHandoverInTime(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 1, 0, 10, 200),
		ex(2, "b", "p1", "w1", 1, 5, 20, 200),
		ex(3, "c", "p1", "w2", 2, 20, 30, 200), // starts exactly when w1's last one ended
		ex(4, "d", "p1", "w1", 3, 40, 50, 200), // back to w1 under a newer epoch
		ex(5, "e", "p2", "w2", 2, 0, 50, 200),  // another instance: no constraint with p1
	}
	if got := Interleavings(execs); len(got) != 0 {
		t.Fatalf("legal history reported: %v", got)
	}
}

func TestInterleavingsFindsOverlap(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 1, 0, 100, 200),
		ex(2, "b", "p1", "w2", 2, 50, 60, 200),
	}
	got := Interleavings(execs)
	if len(got) != 1 || got[0].Kind != KindOverlap || got[0].Earlier.Seq != 1 || got[0].Later.Seq != 2 {
		t.Fatalf("got %v", got)
	}
}

func TestInterleavingsTreatsRunningAsEndless(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 1, 0, -1, 0),
		ex(2, "b", "p1", "w2", 2, 5000, 5001, 200),
	}
	if got := Interleavings(execs); len(got) != 1 || got[0].Kind != KindOverlap {
		t.Fatalf("got %v", got)
	}
}

func TestInterleavingsFindsStaleEpoch(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 4, 0, 10, 200),
		ex(2, "b", "p1", "w2", 5, 100, 110, 200),
		ex(3, "c", "p1", "w1", 4, 200, 210, 200), // w1 again under the epoch it had before w2
	}
	got := Interleavings(execs)
	if len(got) != 1 || got[0].Kind != KindStaleEpoch || got[0].Later.Seq != 3 {
		t.Fatalf("got %v", got)
	}
}

func TestInterleavingsBoundsReportsPerInstance(t *testing.T) {
	var execs []Execution
	execs = append(execs, ex(1, "x", "p1", "w1", 1, 0, -1, 0))
	for i := 2; i < 50; i++ {
		execs = append(execs, ex(uint64(i), "y", "p1", "w2", 2, i, i+1, 200))
	}
	if got := Interleavings(execs); len(got) != maxReportsPerInstance {
		t.Fatalf("%d reports, want %d", len(got), maxReportsPerInstance)
	}
}

func TestDuplicatesOnlyCountsDoneAnswers(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 1, 0, 10, 503),
		ex(2, "a", "p1", "w1", 1, 20, 30, 200),
		ex(3, "b", "p1", "w1", 1, 0, 10, 0), // aborted
		ex(4, "b", "p1", "w2", 2, 20, 30, 200),
		ex(5, "c", "p1", "w1", 1, 40, 50, 200),
		ex(6, "c", "p1", "w2", 2, 60, 70, 409),
		ex(7, "d", "p1", "w1", 1, 0, 10, 422),
	}
	d := Duplicates(execs)
	if len(d) != 1 || d[0].TransactionID != "c" || d[0].First().WorkerID != "w1" || len(d[0].Execs) != 2 {
		t.Fatalf("got %v", d)
	}
	s := Summarize(execs)
	if s.Transactions != 4 || s.Done != 3 || s.ExecutedTwice != 1 || s.ByStatus[0] != 1 || s.ByWorker["w2"] != 2 {
		t.Fatalf("summary %+v", s)
	}
}

func TestRepeatedRefusalsCountsPermanentAnswersOnly(t *testing.T) {
	execs := []Execution{
		ex(1, "a", "p1", "w1", 1, 0, 10, 422),
		ex(2, "a", "p1", "w2", 2, 20, 30, 422), // a dead-lettered step called again
		ex(3, "b", "p1", "w1", 1, 0, 10, 429),
		ex(4, "b", "p1", "w1", 1, 20, 30, 429), // transient, retried: fine
		ex(5, "c", "p1", "w1", 1, 0, 10, 404),
		ex(6, "c", "p1", "w1", 1, 20, 30, 200),
		ex(7, "d", "p1", "w1", 1, 0, 10, 409),
		ex(8, "d", "p1", "w1", 1, 20, 30, 409),
	}
	r := RepeatedRefusals(execs)
	if len(r) != 1 || r[0].TransactionID != "a" || len(r[0].Execs) != 2 || r[0].First().WorkerID != "w1" {
		t.Fatalf("got %v, want a refused twice", r)
	}
}
