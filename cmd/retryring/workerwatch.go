package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"
)

// DefaultCassandraLostAfter is how long Cassandra may be unreachable under a running worker before
// it gives its ranges back (--cassandra-lost-after). Long enough that a restart of one node or a
// short network cut costs no rebalance; short enough that a worker cut off from Cassandra on its
// own does not sit on its ranges while other workers could drain them.
const DefaultCassandraLostAfter = 30 * time.Second

// cassandraPingEvery is the period of the running worker's Cassandra check: a loss shows on
// /readyz within about a period (plus the query timeout), and so does the way back.
const cassandraPingEvery = time.Second

// cassandraPingTimeout bounds one check, beyond the session's own query timeout.
const cassandraPingTimeout = 5 * time.Second

// watchStep is what one check's result means for the worker.
type watchStep int

const (
	stepNone   watchStep = iota
	stepLost             // the first failure after a success: not ready
	stepGiveUp           // unreachable for lostAfter: give the ranges back
	stepBack             // reachable again after failures: ready, and rejoin if it gave up
)

// cassandraWatch turns the results of successive checks into steps, as a pure function of their
// times: Cassandra is lost from the first failed check of a run of failures, and the worker gives
// up its ranges once the run has lasted lostAfter (once per run).
type cassandraWatch struct {
	lostAfter time.Duration
	since     time.Time // the first failed check of the current run; zero while reachable
	gaveUp    bool
}

// observe records a check at now that succeeded (ok) or not, and returns its step.
func (w *cassandraWatch) observe(now time.Time, ok bool) watchStep {
	switch {
	case ok && w.since.IsZero():
		return stepNone
	case ok:
		w.since, w.gaveUp = time.Time{}, false
		return stepBack
	case w.since.IsZero():
		w.since = now
		return stepLost
	case !w.gaveUp && now.Sub(w.since) >= w.lostAfter:
		w.gaveUp = true
		return stepGiveUp
	}
	return stepNone
}

// cassandraWatcher checks the running worker's Cassandra session every cassandraPingEvery and
// acts on the steps: /readyz, the log, the metrics, and the ring membership gate.
type cassandraWatcher struct {
	watch   cassandraWatch
	ping    func(context.Context) error
	ready   *readiness
	stats   *dependencyStats
	log     zerolog.Logger
	members interface{ cassandraChanged(lost string) }
	// back runs when Cassandra is reachable again after failures (the clock is measured again:
	// its estimate may have gone stale meanwhile).
	back func(context.Context)
	now  func() time.Time
}

// pingSession is the check: one read of system.local.
func pingSession(s *gocql.Session) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, cassandraPingTimeout)
		defer cancel()
		var version string
		return s.Query("SELECT release_version FROM system.local").WithContext(ctx).Consistency(gocql.One).Scan(&version)
	}
}

// run checks until ctx ends.
func (w *cassandraWatcher) run(ctx context.Context) {
	t := time.NewTicker(cassandraPingEvery)
	defer t.Stop()
	var flog failureLog
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := w.ping(ctx)
		if ctx.Err() != nil {
			return
		}
		w.step(ctx, err, &flog)
	}
}

// step acts on one check's result.
func (w *cassandraWatcher) step(ctx context.Context, err error, flog *failureLog) {
	now := w.now()
	step := w.watch.observe(now, err == nil)
	if err == nil {
		if step == stepBack {
			w.stats.reachable.Store(true)
			w.ready.setCassandra("")
			failures, lasted := flog.recovered(now)
			w.log.Info().Int("failures", failures).Dur("after", lasted).Msg("cassandra reachable again: the worker is ready (and rejoins its ring if it had left it)")
			w.members.cassandraChanged("")
			if w.back != nil {
				w.back(ctx)
			}
		}
		return
	}
	w.stats.pingFailures.Add(1)
	w.stats.reachable.Store(false)
	reason := cassandraReason(err)
	w.ready.setCassandra(reason)
	logFailure(w.log, flog.failed(now, reason), reason, flog.failures, now.Sub(flog.since), cassandraPingEvery,
		fmt.Sprintf("cassandra lost: the worker is not ready, and gives its ranges back if this lasts --cassandra-lost-after %v", w.watch.lostAfter))
	if step == stepGiveUp {
		w.stats.lost.Add(1)
		lost := fmt.Sprintf("%s (for longer than --cassandra-lost-after %v)", reason, w.watch.lostAfter)
		w.log.Warn().Str("reason", lost).Msg("cassandra lost for too long: giving the ranges back to workers that can reach it")
		w.members.cassandraChanged(lost)
	}
}
