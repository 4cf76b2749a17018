package main

import (
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

func TestParseTimings(t *testing.T) {
	got, err := parseTimings("old, new,fast=5s/1s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name         string
		ttl, renewal time.Duration
	}{{"old", 3 * time.Second, time.Second}, {"new", lease.DefaultTTL, lease.DefaultRenewal}, {"fast", 5 * time.Second, time.Second}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i, w := range want {
		if got[i].name != w.name || got[i].t.TTL != w.ttl || got[i].t.Renewal != w.renewal || got[i].t.Margin == 0 {
			t.Errorf("timing %d: %+v, want %s TTL %v renewal %v with defaults filled", i, got[i], w.name, w.ttl, w.renewal)
		}
	}
	flags, err := parseTimings("", 4*time.Second, 0)
	if err != nil || len(flags) != 1 || flags[0].t.TTL != 4*time.Second || flags[0].t.Renewal != lease.DefaultRenewal {
		t.Errorf("no -timing: %v, %v; want one timing from the flags", flags, err)
	}
	for _, bad := range []string{"medium", "x=5s", "x=5s/abc", "x=1s/2s", "=5s/1s", "old,old", "x=0s/0s"} {
		if _, err := parseTimings(bad, 0, 0); err == nil || !strings.Contains(err.Error(), "-timing") {
			t.Errorf("-timing %q: error %v, want one naming -timing", bad, err)
		}
	}
}

func TestSideBySideHasEveryTiming(t *testing.T) {
	runs := []timingRun{
		{spec: timingSpec{name: "old", t: namedTimings["old"]}, res: newResults()},
		{spec: timingSpec{name: "new", t: namedTimings["new"]}, res: newResults()},
	}
	runs[0].res.add(figTakeover, 2700*time.Millisecond)
	runs[1].res.add(figTakeover, 10500*time.Millisecond)
	runs[1].res.lost = []int{0, 1}
	var b strings.Builder
	renderSideBySide(&b, options{probes: 8}, runs)
	out := b.String()
	for _, want := range []string{"| takeover | TTL + 1 s = 4s | 2700 ms |", "| TTL + 1 s = 11s | 10.5 s |", "1 of 16 probe-trials"} {
		if !strings.Contains(out, want) {
			t.Errorf("side-by-side table lacks %q:\n%s", want, out)
		}
	}
}
