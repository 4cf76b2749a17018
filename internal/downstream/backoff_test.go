package downstream

import (
	"testing"
	"time"
)

// attemptOf builds a finished call of step tx at attempt, from startS to endS seconds after t0.
func attemptOf(seq uint64, tx string, attempt int, startS, endS float64, status int) Execution {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	return Execution{Seq: seq, Request: Request{TransactionID: tx, ImplType: "Pay", InstanceID: "p"},
		Call: Call{Attempt: attempt, WorkerID: "w"}, Start: at(startS), End: at(endS), Status: status}
}

func TestRepeatedAttemptsAndEarlyCalls(t *testing.T) {
	execs := []Execution{
		attemptOf(1, "a", 0, 0, 0.1, 503),
		attemptOf(2, "a", 0, 5, 5.1, 503),   // repeats attempt 0, answered 503 before
		attemptOf(3, "a", 1, 20, 20.1, 503), // answer 5.1 + 30 s lies in the minute from 0 s on, which opens at 0 s: allowed
		attemptOf(9, "d", 0, 50, 50.1, 503),
		attemptOf(10, "d", 1, 59, 59.1, 503), // answer 50.1 + 30 s lies in the next minute (60 s on): 59 s is early
		attemptOf(4, "a", 2, 200, 200.1, 200),
		attemptOf(5, "b", 0, 0, 0.1, 503),
		attemptOf(6, "b", 1, 45, 45.1, 200), // 44.9 s: fine
		attemptOf(7, "c", 0, 0, 0.1, 200),
		attemptOf(8, "c", 0, 1, 1.1, 409), // a repeat of a done call: a duplicate, not a repeated attempt
	}
	rep := RepeatedAttempts(execs)
	if len(rep) != 1 || rep[0].Exec.Seq != 2 || rep[0].Prev.Seq != 1 {
		t.Fatalf("repeated attempts %v; want call 2 repeating call 1", rep)
	}
	early := EarlyCalls(execs, 1, time.Hour)
	if len(early) != 1 || early[0].Exec.Seq != 10 || early[0].Prev.Seq != 9 {
		t.Fatalf("early calls %v; want call 10, before the window its backoff chose", early)
	}
	// Attempt 2 of a came 179.9 s after attempt 1: L × 2 = 2 min, half is 60 s: fine.
	if most, key := CallsPerStep(execs); most != 4 || key != "a:Pay" {
		t.Fatalf("calls per step at most %d (%s), want 4 (a:Pay)", most, key)
	}
	if got := minBackoff(1, 10, time.Hour); got != 30*time.Minute {
		t.Fatalf("minBackoff capped = %v, want 30m", got)
	}
}
