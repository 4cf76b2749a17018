package clockcheck

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/testkit/clocktest"
)

// fakeProber answers as a server whose clock is `offset` ahead of clock, with a 2 ms round trip;
// err, when set, fails the probe.
type fakeProber struct {
	clock  *clocktest.Manual
	offset time.Duration
	err    error
	// during, when set, runs at the start of each probe (a test steps the clock there).
	during func()
	// others are further hosts answering, by their offset from clock.
	others map[string]time.Duration
}

func (p *fakeProber) Probe(context.Context) ([]Sample, error) {
	if p.during != nil {
		p.during()
	}
	if p.err != nil {
		return nil, p.err
	}
	now := p.clock.Now()
	samples := []Sample{probe("h", now.Add(-2*time.Millisecond), p.offset, time.Millisecond, time.Millisecond)}
	for host, off := range p.others {
		samples = append(samples, probe(host, now.Add(-2*time.Millisecond), off, time.Millisecond, time.Millisecond))
	}
	return samples, nil
}

// TestMonitorVerdicts: untrusted before the first measurement; trusted after one within the bound;
// untrusted (told once) when the skew goes past half the bound; trusted again when it comes back;
// untrusted once failed measurements let the estimate turn stale. OnChange hears each change once.
func TestMonitorVerdicts(t *testing.T) {
	clock := clocktest.New(t0)
	p := &fakeProber{clock: clock}
	var changes []bool
	m, err := NewMonitor(Config{Prober: p, Clock: clock, MaxClockOffset: 2 * time.Second, Every: 30 * time.Second,
		OnChange: func(s Status) { changes = append(changes, s.Trusted) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if s := m.Status(); s.Trusted || s.Measured {
		t.Fatalf("before any measurement: %+v", s)
	}
	step := func(offset time.Duration, fail error) {
		t.Helper()
		clock.Advance(30 * time.Second)
		p.offset, p.err = offset, fail
		if err := m.Measure(ctx); !errors.Is(err, fail) {
			t.Fatalf("Measure: %v", err)
		}
	}
	step(200*time.Millisecond, nil)
	step(-300*time.Millisecond, nil)
	if s := m.Status(); !s.Trusted {
		t.Fatalf("within the bound: %+v", s)
	}
	step(1500*time.Millisecond, nil)
	if err := m.Status().Err(); !errors.Is(err, ErrClockUntrusted) {
		t.Fatalf("1.5 s off: Err() = %v", err)
	}
	step(1600*time.Millisecond, nil) // no new change
	step(0, nil)
	boom := errors.New("cassandra down")
	for range 3 { // 90 s: still fresh at the third failure
		step(0, boom)
	}
	if !m.Status().Trusted {
		t.Fatal("a 90 s old estimate is within the 3-period staleness limit")
	}
	step(0, boom)
	if s := m.Status(); s.Trusted || m.Failures() != 4 {
		t.Fatalf("after 4 failed measurements: %+v, %d failures", s, m.Failures())
	}
	want := []bool{true, false, true, false}
	if len(changes) != len(want) {
		t.Fatalf("OnChange heard %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("OnChange heard %v, want %v", changes, want)
		}
	}
}

func TestMonitorConfig(t *testing.T) {
	if _, err := NewMonitor(Config{}); !errors.Is(err, ErrConfig) {
		t.Errorf("no prober: %v", err)
	}
	if _, err := NewMonitor(Config{Prober: &fakeProber{}, Every: time.Minute, StaleAfter: time.Second}); !errors.Is(err, ErrConfig) {
		t.Errorf("staleness limit shorter than the period: %v", err)
	}
}

// TestMonitorMeasuresAgainOnAStep: a wall clock stepped back after a trusted measurement makes the
// next Status untrusted and has Run measure again at once, not a period later; the new
// measurement is trusted.
func TestMonitorMeasuresAgainOnAStep(t *testing.T) {
	clock := clocktest.New(t0)
	probed := make(chan struct{}, 1)
	p := &fakeProber{clock: clock}
	m, err := NewMonitor(Config{Prober: p, Clock: clock, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Measure(ctx); err != nil || !m.Status().Trusted {
		t.Fatalf("first measurement: %v, %+v", err, m.Status())
	}
	p.during = func() {
		select {
		case probed <- struct{}{}:
		default:
		}
	}
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	clock.Set(t0.Add(-time.Second))
	if s := m.Status(); s.Trusted || !s.Stepped {
		t.Fatalf("after the step: %+v", s)
	}
	select {
	case <-probed:
	case <-time.After(10 * time.Second): // a guard against a hang; Every is an hour
		t.Fatal("no measurement after the wall clock stepped")
	}
	cancel()
	<-ran
	if s := m.Status(); !s.Trusted {
		t.Fatalf("after the new measurement: %+v", s)
	}
}

// TestMonitorSeesAStepDuringAMeasurement: a wall clock stepped back while the queries are out
// leaves an estimate that does not describe the clock: untrusted.
func TestMonitorSeesAStepDuringAMeasurement(t *testing.T) {
	clock := clocktest.New(t0)
	p := &fakeProber{clock: clock, during: func() { clock.Set(t0.Add(-time.Second)) }}
	m, err := NewMonitor(Config{Prober: p, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := m.Status(); s.Trusted || !s.Stepped {
		t.Fatalf("a step during the measurement: %+v", s)
	}
}

// TestMonitorSaysWhenHostsDisagree: of three Cassandra hosts one runs 5 s ahead: the clock is
// judged by the median host (trusted), and one log line says the hosts disagree, however many
// measurements see it; one more says when they agree again.
func TestMonitorSaysWhenHostsDisagree(t *testing.T) {
	clock := clocktest.New(t0)
	p := &fakeProber{clock: clock, others: map[string]time.Duration{"near": 50 * time.Millisecond, "ahead": 5 * time.Second}}
	var logs bytes.Buffer
	m, err := NewMonitor(Config{Prober: p, Clock: clock, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := m.Measure(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := m.Status(); !s.Trusted || s.Estimate.Spread < 5*time.Second {
			t.Fatalf("one host 5 s ahead: %+v, want trusted by the median host, the spread said", s)
		}
	}
	delete(p.others, "ahead")
	if err := m.Measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "hosts disagree on the time"); n != 1 {
		t.Errorf("%d lines on the disagreement, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "agree on the time again"); n != 1 {
		t.Errorf("%d lines on the agreement, want 1:\n%s", n, logs.String())
	}
}
