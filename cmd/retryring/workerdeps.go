package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"github.com/rs/zerolog"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/worker/leaseclient"
)

// readiness is what /readyz says beyond the lease: why the worker cannot work yet (Cassandra, its
// schema, its coordinator credentials) and, once it runs, its clock and its timeouts' fit.
type readiness struct {
	mu sync.Mutex
	// cassandra says why Cassandra cannot be used now; "" when it can.
	cassandra string
	// coordinator says how a coordinator refused this worker's credentials; "" when none did.
	coordinator string
	// leaseFit, clock and cycles exist once the worker runs (after Cassandra); nil before.
	leaseFit func() string
	clock    func() clockcheck.Status
	// cycles says why the cycles keep failing though the session answers (cycleHealth).
	cycles func() string
}

func (r *readiness) setCassandra(reason string) {
	r.mu.Lock()
	r.cassandra = reason
	r.mu.Unlock()
}

func (r *readiness) setCoordinator(reason string) {
	r.mu.Lock()
	r.coordinator = reason
	r.mu.Unlock()
}

// running records the parts that exist once Cassandra is up.
func (r *readiness) running(leaseFit func() string, clock func() clockcheck.Status, cycles func() string) {
	r.mu.Lock()
	r.leaseFit, r.clock, r.cycles = leaseFit, clock, cycles
	r.mu.Unlock()
}

// snapshot returns the reasons and the running parts. Cassandra's reason is the session's
// (unreachable, refused, an old schema) or else the failing cycles'.
func (r *readiness) snapshot() (cass, coord string, leaseFit func() string, clock func() clockcheck.Status) {
	r.mu.Lock()
	cass, coord, leaseFit, clock, cycles := r.cassandra, r.coordinator, r.leaseFit, r.clock, r.cycles
	r.mu.Unlock()
	if cass == "" && cycles != nil {
		cass = cycles()
	}
	return cass, coord, leaseFit, clock
}

// cassandraReason says in one line why Cassandra cannot be used: unreachable, a login or TLS
// refusal in words, or a schema that is missing or too old with the command that fixes it.
func cassandraReason(err error) string {
	var ce *cassandra.ConnectError
	switch {
	case errors.Is(err, cassandra.ErrSchemaOutdated):
		return err.Error() // names what is missing and `retryring schema apply`
	case errors.As(err, &ce) && errors.Is(err, cassandra.ErrLogin):
		return "cassandra refused the login at " + ce.Host + ": " + ce.Reason
	case errors.As(err, &ce) && errors.Is(err, cassandra.ErrTLS):
		return "cassandra TLS failed at " + ce.Host + ": " + ce.Reason
	}
	return "cassandra unreachable: " + oneLine(strings.TrimPrefix(err.Error(), "cassandra: "))
}

// oneLine keeps a message on one line (a driver's error may span several).
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cassandraGate opens the worker's Cassandra session and checks its schema, retrying both until
// they succeed or ctx ends. Meanwhile /readyz says why, the log says so once per cause (and once
// a minute while the cause lasts), and the metrics count the attempts.
type cassandraGate struct {
	connect func(context.Context) (*gocql.Session, error)
	check   func(context.Context, *gocql.Session) error
	ready   *readiness
	stats   *dependencyStats
	log     zerolog.Logger
	now     func() time.Time
	sleep   func(context.Context, time.Duration) bool
	draw    func() float64
}

// open returns the session once it is open and its schema good; ctx's error if ctx ended first.
// A session whose schema check fails is kept, and only the check is retried.
func (g *cassandraGate) open(ctx context.Context) (*gocql.Session, error) {
	var (
		session *gocql.Session
		flog    failureLog
	)
	for n := 0; ; n++ {
		g.stats.connectAttempts.Add(1)
		var err error
		if session == nil {
			session, err = g.connect(ctx)
		}
		if err == nil {
			err = g.check(ctx, session)
		}
		if err == nil {
			g.ready.setCassandra("")
			g.stats.reachable.Store(true)
			if failures, lasted := flog.recovered(g.now()); failures > 0 {
				g.log.Info().Int("failures", failures).Dur("after", lasted).Msg("cassandra ready: session open and schema current")
			}
			return session, nil
		}
		if ctx.Err() != nil {
			if session != nil {
				session.Close()
			}
			return nil, ctx.Err()
		}
		g.stats.connectFailures.Add(1)
		reason := cassandraReason(err)
		g.ready.setCassandra(reason)
		delay := retryDelay(n, g.draw())
		logFailure(g.log, flog.failed(g.now(), reason), reason, flog.failures, g.now().Sub(flog.since), delay,
			"cassandra not ready: the worker stays up, not ready, and retries")
		if !g.sleep(ctx, delay) {
			if session != nil {
				session.Close()
			}
			return nil, ctx.Err()
		}
	}
}

// logFailure writes the line failed asked for, if any.
func logFailure(log zerolog.Logger, line failureLine, reason string, failures int, lasted, retry time.Duration, msg string) {
	var ev *zerolog.Event
	switch line {
	case lineFirst:
		ev = log.Warn()
	case lineChanged:
		ev = log.Warn().Str("change", "the cause changed")
	case lineStillBad:
		ev = log.Warn().Str("change", "still failing")
	default:
		return
	}
	ev.Str("reason", reason).Int("failures", failures).Dur("failing_for", lasted).Dur("next_retry", retry).Msg(msg)
}

// checkCredentials asks the coordinators, through check (leaseclient.CheckCredentials), whether
// they admit this worker, until one does or ctx ends (the worker is about to join: the lease
// client takes over). A refusal is on /readyz and logged; coordinators that do not answer are
// logged only (the lease client retries them anyway once the worker runs).
func checkCredentials(ctx context.Context, check func(context.Context) error, ready *readiness, log zerolog.Logger,
	now func() time.Time, sleep func(context.Context, time.Duration) bool, draw func() float64) {
	var flog failureLog
	for n := 0; ; n++ {
		err := check(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			ready.setCoordinator("")
			if failures, lasted := flog.recovered(now()); failures > 0 {
				log.Info().Int("failures", failures).Dur("after", lasted).Msg("a coordinator admits this worker's credentials")
			}
			return
		}
		reason := oneLine(err.Error())
		msg := "no coordinator answered the credentials check; retrying"
		if errors.Is(err, leaseclient.ErrRefused) {
			ready.setCoordinator(reason)
			msg = "a coordinator refused this worker's credentials: fix the token or certificate; retrying"
		}
		delay := retryDelay(n, draw())
		logFailure(log, flog.failed(now(), reason), reason, flog.failures, now().Sub(flog.since), delay, msg)
		if !sleep(ctx, delay) {
			return
		}
	}
}

// dependencyStats are the counters behind the worker's dependency metrics (workermetrics.go).
type dependencyStats struct {
	connectAttempts, connectFailures, pingFailures, lost atomic.Uint64
	reachable                                            atomic.Bool
}

func jitter() float64 { return rand.Float64() }
