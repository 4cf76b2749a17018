package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
)

// checkedClock measures clock's offset from Cassandra's through session and, when it is within
// half of maxClockOffset, keeps measuring it in the background until stop. A command that records
// (record, deadletters replay) calls it before it writes anything and passes the monitor to its
// recorders: a row stamped by a clock beyond the bound could be hidden by a worker's delete. An
// untrusted clock is refused with the measured figures; what names the command, nothing says what
// it did not do.
func checkedClock(ctx context.Context, session *gocql.Session, clock lease.Clock, maxClockOffset time.Duration, what, nothing string) (mon *clockcheck.Monitor, stop func(), err error) {
	mon, err = clockcheck.NewMonitor(clockcheck.Config{Prober: clockcheck.NewCassandraProber(session, clock), Clock: clock, MaxClockOffset: maxClockOffset})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := mon.Measure(ctx); err != nil {
		return nil, nil, fmt.Errorf("%s: measuring the clock offset from Cassandra: %w (%s)", what, err, nothing)
	}
	if err := mon.Status().Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w (%s; fix the host's time sync, docs/operations.md \"Clock offset\")", what, err, nothing)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mon.Run(runCtx)
	}()
	return mon, func() { cancel(); <-done }, nil
}
