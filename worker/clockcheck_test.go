package worker

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// scriptedClockCheck answers a fixed verdict and ends the run after n questions.
type scriptedClockCheck struct {
	status clockcheck.Status
	asked  int
	n      int
	stop   context.CancelFunc
}

func (c *scriptedClockCheck) Status() clockcheck.Status {
	c.asked++
	if c.asked >= c.n {
		c.stop()
	}
	return c.status
}

// TestRunStartsNoCycleOnAnUntrustedClock: with a usable lease in the guard but the clock judged
// untrusted, Run starts no cycle (the store, which panics on any call, is never reached) and
// keeps asking the clock check; the report carries the clock's figures.
func TestRunStartsNoCycleOnAnUntrustedClock(t *testing.T) {
	clock := clocktest.New(clocktest.Start)
	g := lease.NewGuard(clock, 100*time.Millisecond)
	g.Set(lease.Lease{Epoch: 1, NodeIndex: 0, NodeCount: 1, TTL: time.Hour, Renewal: time.Minute, ValidFrom: clock.Now(),
		Ranges: lease.Ranges{lease.FullRing}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	check := &scriptedClockCheck{n: 5, stop: cancel, status: clockcheck.Check(
		clockcheck.Estimate{Host: "h", Offset: -3 * time.Second, Uncertainty: time.Millisecond, Hosts: 1, At: clock.Now()},
		true, clock.Now(), 2*time.Second, time.Minute)}
	sc := unitScanner(t, Config{Clock: clock, ClockCheck: check, IdleBackoff: time.Millisecond}, g)
	if err := sc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if check.asked < 5 {
		t.Fatalf("the clock was asked %d times", check.asked)
	}
	r := sc.Report()
	if r.Clock == nil || r.Clock.OffsetUs != -3_000_000 || r.Clock.UncertaintyUs != 1000 || r.Clock.LimitUs != 1_000_000 || r.Clock.Trusted {
		t.Fatalf("report clock %+v", r.Clock)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
}
