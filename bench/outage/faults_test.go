package main

import (
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/downstream"
)

func TestAttributionPlacesARepeatAgainstTheNearestFault(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	faults := []fault{
		{kind: "sigstop", who: "w3", start: at(60), end: at(64)},
		{kind: "leader kill", who: "c1", start: at(90), end: at(92)},
	}
	repeatEndingAt := func(s float64) downstream.Retry {
		return downstream.Retry{Key: "tx:Pay", Prev: downstream.Execution{End: at(s)}, Exec: downstream.Execution{Start: at(s + 20)}}
	}
	for _, c := range []struct {
		end  float64
		want string
	}{
		{62, "during sigstop w3"},
		{66.5, "2.5s after sigstop w3"},
		{89, "1s before leader kill c1"},
		{95, "3s after leader kill c1"},
		{10, "outside every fault"},
		{77.5, "outside every fault"},
	} {
		if got := attribution(faults, repeatEndingAt(c.end), 3*time.Second); got != c.want {
			t.Errorf("first call ending at %v s: %q, want %q", c.end, got, c.want)
		}
	}
	if got := attribution(nil, repeatEndingAt(62), time.Second); got != "no fault in this run" {
		t.Errorf("no faults: %q", got)
	}
	report := repeatReport("x", []downstream.Retry{repeatEndingAt(62), repeatEndingAt(63), repeatEndingAt(95)}, faults, t0, 3*time.Second)
	if !strings.Contains(report, "3 in all (after leader kill c1: 1; during sigstop w3: 2)") {
		t.Errorf("report does not count the repeats by fault:\n%s", report)
	}
}
