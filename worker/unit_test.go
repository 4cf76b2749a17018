package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/worker/retrypolicy"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	base := Config{Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "w1"}
	if err := base.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	d := base.WithDefaults()
	if d.QueryTimeout != time.Second || d.ExecTimeout != 5*time.Second || d.MaxRate != 0 {
		t.Fatalf("timeouts %v and %v, max rate %v; want product.md's 1 s and 5 s, no cap", d.QueryTimeout, d.ExecTimeout, d.MaxRate)
	}
	if d.WindowMinutes != 1 || d.LookbackDays != 2 || d.MaxClockOffset != 2*time.Second || d.Concurrency != 100 ||
		d.MaxAttempts != 10 || d.MaxRetryDelay != time.Hour || d.MarkerRetention != 7*24*time.Hour || d.Clock == nil {
		t.Fatalf("defaults: %+v", d)
	}
	bad := []func(*Config){
		func(c *Config) { c.Region = "" },
		func(c *Config) { c.WorkerID = "" },
		func(c *Config) { c.WindowMinutes = 7 },
		func(c *Config) { c.LookbackDays = -1 },
		func(c *Config) { c.MaxClockOffset = time.Minute }, // not shorter than a 1-minute window
		func(c *Config) { c.Concurrency = -1 },
		func(c *Config) { c.QueryTimeout = -time.Second },
		func(c *Config) { c.MaxAttempts = -1 },
		func(c *Config) { c.MaxRate = -1 },
		func(c *Config) { c.MaxRate = math.Inf(1) },
		func(c *Config) { c.MaxRate = math.NaN() },
	}
	for i, mutate := range bad {
		c := base
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: Validate() = %v, want ErrInvalidConfig", i, err)
		}
	}
}

// TestMarkerRetentionMustExceedTwiceTheCarryMargin: a retention at or below two carry margins
// would have every kept bucket carried the first time it is seen; it is refused with an error
// naming both figures. The pause sweep must come at least twice within the margin.
func TestMarkerRetentionMustExceedTwiceTheCarryMargin(t *testing.T) {
	base := Config{Region: "eu", Cluster: "c1", Service: "orders", WorkerID: "w"}
	for _, retention := range []time.Duration{time.Second, 24 * time.Hour, 2 * carryMargin} {
		c := base
		c.MarkerRetention = retention
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), retention.String()) ||
			!strings.Contains(err.Error(), carryMargin.String()) || !strings.Contains(err.Error(), "MarkerRetention") {
			t.Errorf("retention %v: Validate() = %v; want ErrInvalidConfig naming the retention, the carry margin and the setting", retention, err)
		}
	}
	c := base
	c.MarkerRetention = 2*carryMargin + time.Second
	if err := c.Validate(); err != nil {
		t.Errorf("retention just over two carry margins: %v", err)
	}
	for _, every := range []time.Duration{-time.Second, carryMargin/2 + time.Second} {
		c := base
		c.PauseSweepEvery = every
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("pause sweep every %v: Validate() = %v, want ErrInvalidConfig", every, err)
		}
	}
	if d := base.WithDefaults(); d.PauseSweepEvery != time.Hour {
		t.Errorf("pause sweep default %v, want an hour", d.PauseSweepEvery)
	}
}

// TestDrainWaitsForDroppedTokensOnly: Drain returns at once when nothing in flight touches a
// dropped token, and otherwise only once those operations ended.
func TestDrainWaitsForDroppedTokensOnly(t *testing.T) {
	sc := &Scanner{inflight: newInflight()}
	halves := lease.Split(2)
	old := lease.Lease{Ranges: lease.Ranges{halves[0], halves[1]}, NodeIndex: 0}
	next := lease.Lease{Ranges: lease.Ranges{halves[0]}, NodeIndex: 1}

	endKept := sc.inflight.begin(tokenScope(halves[0].Start))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sc.Drain(ctx, old, next); err != nil {
		t.Fatalf("Drain with work on kept tokens only: %v", err)
	}

	endDropped := sc.inflight.begin(tokenScope(halves[1].End))
	endNode0 := sc.inflight.begin(opScope{node0: true})
	done := make(chan error, 1)
	go func() { done <- sc.Drain(ctx, old, next) }()
	endDropped()
	select {
	case err := <-done:
		t.Fatalf("Drain returned (%v) while a Node-0 operation was in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	endNode0()
	if err := <-done; err != nil {
		t.Fatalf("Drain: %v", err)
	}
	endKept()

	stuck := sc.inflight.begin(tokenScope(halves[1].Start))
	defer stuck()
	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	if err := sc.Drain(short, old, next); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a cancelled ctx: %v", err)
	}
}

// noStore is a Store for tests of pure logic, which must never reach Cassandra: any call panics.
type noStore struct{ Store }

// unitScanner is a Scanner on guard that runs no query: for the logic around the data plane.
func unitScanner(t *testing.T, cfg Config, guard Guard) *Scanner {
	t.Helper()
	cfg.Region, cfg.Cluster, cfg.Service, cfg.WorkerID = "eu", "c1", "orders", "w1"
	sc, err := New(cfg, noStore{}, guard, ExecutorFunc(func(context.Context, Task) Outcome {
		t.Error("executed in a test of pure logic")
		return Outcome{Kind: NotSent}
	}))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestMetricsCollectsStats: the counters come from Stats; the gauges say what the lease in force
// makes of the worker (its timeouts do not fit, the ring is paused, the rate it allows itself)
// and where each breaker stands, one series per impl type.
func TestMetricsCollectsStats(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	rate := 2.5
	g.Set(lease.Lease{
		Epoch: 1, Ranges: lease.Ranges{lease.FullRing}, ValidFrom: clock.Now(), TTL: 3 * time.Second, Renewal: time.Second,
		Controls: &lease.Controls{Paused: true, RatePerS: &rate},
	})
	policies, err := retrypolicy.Parse("policy.yaml", []byte("Payment:\n  max_attempts: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	sc := unitScanner(t, Config{Clock: clock, Concurrency: 4, MaxRate: 1, Policies: policies}, g)
	sc.stats.Done = 3
	sc.stats.WindowsDeleted = 2
	sc.stats.BreakerRefused = 5
	sc.stats.InstancesScanned = 9
	sc.stats.InstancesRescannedStart = 7
	sc.stats.InstancesRescannedHandover = 4
	sc.sem <- struct{}{}
	for i := 0; i < breakerMinCalls; i++ {
		tk, _ := sc.breakers.admit("Ship", clock.Now())
		sc.breakers.settle(tk, true, clock.Now())
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewMetrics(sc)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			if c := m.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				got[key] = g.GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"retryring_worker_executions_total{outcome=done}":            3,
		"retryring_worker_executions_total{outcome=transient}":       0,
		"retryring_worker_windows_deleted_total":                     2,
		"retryring_worker_executions_in_flight":                      1,
		"retryring_worker_guard_refusals_total":                      0,
		"retryring_worker_breaker_refused_total":                     5,
		"retryring_worker_instances_scanned_total":                   9,
		"retryring_worker_instances_rescanned_total{after=start}":    7,
		"retryring_worker_instances_rescanned_total{after=handover}": 4,
		"retryring_worker_lease_fit":                                 0, // 1 s query timeout + margin > 3 s − 2 × 1 s
		"retryring_worker_paused":                                    1,
		"retryring_worker_execution_rate_limit":                      1, // the share 2.5/s, capped by MaxRate
		"retryring_worker_breaker_state{impl=Payment}":               float64(breakerClosed),
		"retryring_worker_breaker_state{impl=Ship}":                  float64(breakerOpen),
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
}

// TestStatsSnapshotAndSubCoverEveryField: a counter added to Stats is read and subtracted too.
func TestStatsSnapshotAndSubCoverEveryField(t *testing.T) {
	var live Stats
	v := reflect.ValueOf(&live).Elem()
	for i := 0; i < v.NumField(); i++ {
		v.Field(i).SetUint(uint64(10 + i))
	}
	snap := snapshot(&live)
	if snap != live {
		t.Fatalf("snapshot %+v != %+v", snap, live)
	}
	d := snap.Sub(Stats{Cycles: 1, Errors: 2})
	dv := reflect.ValueOf(d)
	for i := 0; i < dv.NumField(); i++ {
		want := uint64(10 + i)
		switch v.Type().Field(i).Name {
		case "Cycles":
			want--
		case "Errors":
			want -= 2
		}
		if dv.Field(i).Uint() != want {
			t.Errorf("Sub: %s = %d, want %d", v.Type().Field(i).Name, dv.Field(i).Uint(), want)
		}
	}
}

// TestSettleRetriable: a settling write is tried again after a failed query or a stall between
// the guard's check and the write, never after a refusal of the guard itself or a stop.
func TestSettleRetriable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("gocql: no response received from cassandra within timeout period"), true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("%w: %w", lease.ErrLeaseTooShort, errStalled), true},
		{lease.ErrLeaseTooShort, false},
		{lease.ErrLeaseExpired, false},
		{lease.ErrNoLease, false},
		{lease.ErrTokenNotLeased, false},
		{fmt.Errorf("%w: %w", ErrStopped, context.DeadlineExceeded), false},
	} {
		if got := settleRetriable(c.err); got != c.want {
			t.Errorf("settleRetriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
