package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestCycleHealth: the rule behind /readyz's failing cycles, on an injected clock. Fewer than
// three failures in a row within 15 s leave the worker ready; the third makes it not ready with
// the count, the time and the last error; so does a single failure once 15 s passed without a
// success; one cycle that runs to its end makes it ready again and starts the count over. The log
// says each change once.
func TestCycleHealth(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	h := newCycleHealth(func() time.Time { return now }, zerolog.New(&logs))
	timeout := errors.New("worker: read bucket: gocql: no response received from cassandra within timeout period")
	quorum := errors.New("cassandra: list instances: Cannot achieve consistency level LOCAL_QUORUM")
	step := func(d time.Duration, err error, want string) {
		t.Helper()
		now = now.Add(d)
		h.ended(err)
		if got := h.reason(); got != want {
			t.Fatalf("after %v: reason %q, want %q", err, got, want)
		}
	}
	step(0, nil, "")
	step(time.Second, timeout, "")
	step(2*time.Second, quorum, "")
	step(time.Second, quorum, "cassandra: 3 cycles failed in a row, for 3s: list instances: Cannot achieve consistency level LOCAL_QUORUM")
	step(time.Second, quorum, "cassandra: 4 cycles failed in a row, for 4s: list instances: Cannot achieve consistency level LOCAL_QUORUM")
	step(time.Second, nil, "")
	step(time.Second, quorum, "")
	step(time.Second, nil, "") // one failure alone, then a success: never not ready

	// One failure, then a cycle that does not end (its queries wait for their timeouts): not
	// ready once 15 s passed since the failure, without another cycle ending.
	step(time.Second, timeout, "")
	now = now.Add(notReadyAfterFailingFor - time.Second)
	if got := h.reason(); got != "" {
		t.Fatalf("14 s after one failure: %q, want ready", got)
	}
	now = now.Add(time.Second)
	want := "cassandra: 1 cycle failed in a row, for 15s: worker: read bucket: gocql: no response received from cassandra within timeout period"
	if got := h.reason(); got != want {
		t.Fatalf("15 s after one failure: %q, want %q", got, want)
	}
	step(time.Second, nil, "")

	out := logs.String()
	if n := strings.Count(out, "cycles keep failing: the worker is not ready (it keeps its ranges and retries)"); n != 2 {
		t.Errorf("the not-ready line was logged %d times, want 2 (once per run of failures that counted):\n%s", n, out)
	}
	if n := strings.Count(out, "a cycle succeeded again: the worker is ready"); n != 2 {
		t.Errorf("the ready-again line was logged %d times, want 2:\n%s", n, out)
	}
}
