package lease_test

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
)

func TestTimingDefaults(t *testing.T) {
	d := lease.Timing{}.WithDefaults()
	want := lease.Timing{TTL: 10 * time.Second, Renewal: 2 * time.Second, Drift: 0.001, Margin: 100 * time.Millisecond}
	if d != want {
		t.Fatalf("defaults %+v, want %+v", d, want)
	}
	if least := (lease.Lease{TTL: d.TTL, Renewal: d.Renewal}).LeastValidity(); least != 6*time.Second {
		t.Fatalf("least validity of the defaults %v, want 6s: room for a 5 s call and the guard's margin", least)
	}
	set := lease.Timing{TTL: 3 * time.Second, Renewal: time.Second, Drift: 0.01, Margin: time.Second}
	if set.WithDefaults() != set {
		t.Fatalf("WithDefaults overrode set fields: %+v", set.WithDefaults())
	}
	if err := (lease.Timing{}).Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if got := (lease.Timing{}).HolderBound(); got != 10110*time.Millisecond {
		t.Fatalf("default HolderBound = %v, want 10s×1.001+100ms = 10.11s", got)
	}
	sent := time.Unix(1_700_000_000, 0)
	if got := (lease.Timing{}).PossiblyAliveUntil(sent); !got.Equal(sent.Add(10110 * time.Millisecond)) {
		t.Fatalf("PossiblyAliveUntil = %v", got)
	}
}

func TestTimingValidate(t *testing.T) {
	ok := []lease.Timing{
		{},
		{TTL: 2 * time.Second, Renewal: time.Second}, // renewal exactly half the TTL
		{TTL: 3 * time.Second, Renewal: 1500 * time.Millisecond},
		{Drift: 0.0999},
		{TTL: time.Hour, Renewal: time.Minute, Drift: 0.01, Margin: time.Second},
	}
	for _, tm := range ok {
		if err := tm.Validate(); err != nil {
			t.Errorf("%+v refused: %v", tm, err)
		}
	}
	bad := []lease.Timing{
		{TTL: -time.Second},
		{Renewal: -time.Second},
		{Margin: -time.Millisecond},
		{Drift: -0.001},
		{TTL: 3 * time.Second, Renewal: 1500*time.Millisecond + 1},
		{TTL: time.Second}, // default renewal 2s is more than half
		{Renewal: 5*time.Second + 1},
		{Drift: 0.1},
		{Drift: math.NaN()},
		{Drift: math.Inf(1)},
		{TTL: math.MaxInt64, Renewal: time.Second},            // holder bound overflows
		{TTL: time.Second * 2, Renewal: 1<<62 + 1},            // renewal×2 overflows
		{TTL: time.Second, Renewal: 1, Margin: math.MaxInt64}, // holder bound overflows
	}
	for _, tm := range bad {
		if err := tm.Validate(); err == nil {
			t.Errorf("%+v accepted", tm)
		}
	}
}

// HolderBound against exact rational arithmetic: never below TTL×(1+ρ)+margin (the unsafe side),
// and at most one nanosecond above it. ρ is drawn in parts per million so that its exact decimal
// value is known.
func TestHolderBoundMatchesExactModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ttl := rapid.Int64Range(1, int64(time.Minute)).Draw(t, "ttl_ns")
		ppm := rapid.Int64Range(1, 10_000).Draw(t, "drift_ppm")
		margin := rapid.Int64Range(1, int64(time.Second)).Draw(t, "margin_ns") // zero would mean the default
		tm := lease.Timing{TTL: time.Duration(ttl), Renewal: 1, Drift: float64(ppm) / 1e6, Margin: time.Duration(margin)}
		exact := new(big.Rat).SetFrac64(ttl*(1_000_000+ppm), 1_000_000)
		exact.Add(exact, new(big.Rat).SetInt64(margin))
		got := new(big.Rat).SetInt64(int64(tm.HolderBound()))
		if got.Cmp(exact) < 0 {
			t.Fatalf("HolderBound %v is below the exact bound %s", tm.HolderBound(), exact.FloatString(6))
		}
		// Up to a nanosecond over is fine: float64(ρ) can sit a hair above ρ and Ceil then adds one.
		if got.Sub(got, exact).Cmp(big.NewRat(1, 1)) > 0 {
			t.Fatalf("HolderBound %v is more than a nanosecond above the exact bound %s", tm.HolderBound(), exact.FloatString(6))
		}
	})
}

func TestLeaseTimes(t *testing.T) {
	from := time.Unix(1_700_000_000, 0)
	l := lease.Lease{TTL: 3 * time.Second, ValidFrom: from}
	if !l.ExpiresAt().Equal(from.Add(3*time.Second)) || l.Remaining(from.Add(time.Second)) != 2*time.Second || l.Remaining(from.Add(4*time.Second)) != -time.Second {
		t.Fatalf("ExpiresAt/Remaining wrong: %v", l.ExpiresAt())
	}
	if !(lease.Lease{NodeIndex: 0}).IsNode0() || (lease.Lease{NodeIndex: 1}).IsNode0() {
		t.Fatal("IsNode0 wrong")
	}
}

func TestRingKeyValidate(t *testing.T) {
	if err := (lease.RingKey{Region: "eu", Cluster: "c", Service: "s"}).Validate(); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", lease.MaxRingNameBytes+1)
	if err := (lease.RingKey{Region: long[1:], Cluster: "c", Service: "s"}).Validate(); err != nil {
		t.Fatalf("a name of exactly %d bytes: %v", lease.MaxRingNameBytes, err)
	}
	for _, k := range []lease.RingKey{{}, {Region: "eu", Cluster: "c"}, {Cluster: "c", Service: "s"}, {Region: "eu", Service: "s"},
		{Region: long, Cluster: "c", Service: "s"}, {Region: "eu", Cluster: long, Service: "s"}, {Region: "eu", Cluster: "c", Service: long}} {
		if err := k.Validate(); !errors.Is(err, lease.ErrBadRequest) {
			t.Errorf("%+v: got %v", k, err)
		}
	}
}

// TestParseRing: REGION/CLUSTER/SERVICE reads into its key; anything else says what it wants.
func TestParseRing(t *testing.T) {
	k, err := lease.ParseRing("eu/c1/orders")
	if err != nil || k != (lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}) {
		t.Fatalf("eu/c1/orders: %+v %v", k, err)
	}
	for in, want := range map[string]string{
		"eu/c1":         `want REGION/CLUSTER/SERVICE, got "eu/c1"`,
		"":              `want REGION/CLUSTER/SERVICE, got ""`,
		"eu/c1/orders/": `want REGION/CLUSTER/SERVICE, got "eu/c1/orders/"`,
		"eu//orders":    `ring "eu//orders": `,
	} {
		if _, err := lease.ParseRing(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRing(%q): %v, want %q", in, err, want)
		}
	}
}
