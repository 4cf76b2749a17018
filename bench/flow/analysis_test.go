package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// naiveIn counts by looking at every start.
func naiveIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func TestCountsAgreeWithANaiveScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for trial := range 200 {
		raw := make([]time.Time, r.IntN(300))
		for i := range raw {
			// Whole milliseconds, so that starts fall on slice and step boundaries too.
			raw[i] = t0.Add(time.Duration(r.IntN(5000)) * time.Millisecond)
		}
		s := sortedStarts(raw)
		end := t0.Add(time.Duration(r.IntN(5000)) * time.Millisecond)
		d := time.Duration(1+r.IntN(2000)) * time.Millisecond
		got := s.slices(t0, end, d)
		var want []int
		for from := t0; !from.Add(d).After(end); from = from.Add(d) {
			want = append(want, naiveIn(raw, from, from.Add(d)))
		}
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d slices, want %d", trial, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("trial %d slice %d: %d starts, want %d", trial, i, got[i], want[i])
			}
		}
		most, fewest, ok := s.sliding(t0, end, d, 10*time.Millisecond)
		wantOK, wantMost, wantFewest := false, 0, 0
		for from := t0; !from.Add(d).After(end); from = from.Add(10 * time.Millisecond) {
			n := naiveIn(raw, from, from.Add(d))
			if !wantOK || n > wantMost {
				wantMost = n
			}
			if !wantOK || n < wantFewest {
				wantFewest = n
			}
			wantOK = true
		}
		if ok != wantOK || most != wantMost || fewest != wantFewest {
			t.Fatalf("trial %d: sliding %d..%d (%v), want %d..%d (%v)", trial, fewest, most, ok, wantFewest, wantMost, wantOK)
		}
	}
}

func TestSlicesAtTheirBoundaries(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A start on a boundary opens the later slice; the slice cut off at 2.5 s is not counted.
	s := sortedStarts([]time.Time{at(2400), at(0), at(999), at(1000), at(1999)})
	got := s.slices(t0, at(2500), time.Second)
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("slices %v, want [2 2]", got)
	}
	if l, ok := s.last(at(1999)); !ok || !l.Equal(at(1000)) {
		t.Fatalf("last before 1999 ms: %v %v, want 1000 ms", l, ok)
	}
	if _, ok := s.last(at(0)); ok {
		t.Fatal("a start before the first one")
	}
	if p := percent(30, time.Minute, 0.5); p != 100 {
		t.Fatalf("30 in a minute at 0.5/s is %v %%, want 100", p)
	}
}
