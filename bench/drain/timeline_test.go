package main

import (
	"testing"
	"time"
)

// TestTimelineFigures: the longest gap, the rate in a span and the transactions executed twice,
// on a hand-made history.
func TestTimelineFigures(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 13, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	es := []execution{
		{at(0), "a"}, {at(100), "b"}, {at(200), "c"}, // 3 in the first second
		{at(3200), "d"}, // 3 s gap after c
		{at(3300), "a"}, // a again
		{at(3400), "a"}, // and a third time: still one transaction executed twice
		{at(3500), "b"},
	}
	if gap, after := longestGap(es); gap != 3*time.Second || !after.Equal(at(200)) {
		t.Errorf("longest gap %v after %v, want 3s after %v", gap, after, at(200))
	}
	if r := rate(es, t0, time.Second); r != 3 {
		t.Errorf("rate in the first second %v, want 3", r)
	}
	if r := rate(es, at(3200), 2*time.Second); r != 2 {
		t.Errorf("rate from 3.2 s over 2 s %v, want 2 (4 executions / 2 s)", r)
	}
	if r := rate(es, t0, 0); r != 0 {
		t.Errorf("rate over an empty span %v, want 0", r)
	}
	if n := twice(es); n != 2 {
		t.Errorf("executed twice %d, want 2 (a and b)", n)
	}
	if gap, _ := longestGap(es[:1]); gap != 0 {
		t.Errorf("gap of one execution %v", gap)
	}
	tl := &timeline{execs: es}
	if n := tl.distinct(); n != 4 {
		t.Errorf("distinct %d, want 4", n)
	}
}
