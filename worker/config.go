package worker

import (
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker/retrypolicy"
)

// Defaults of Config. A zero field in a Config means its default.
const (
	// DefaultWindowMinutes is the window length L. It must match the service's writers.
	DefaultWindowMinutes = 1
	// DefaultLookbackDays is the minimum history checked every cycle, even for days missing from
	// es_days_by_year. Older days listed there are always checked too.
	DefaultLookbackDays = 2
	// DefaultMaxClockOffset bounds the clock error of every writer and worker (product.md).
	DefaultMaxClockOffset = 2 * time.Second
	// DefaultConcurrency is the number of executions in flight at most.
	DefaultConcurrency = 100
	// DefaultQueryTimeout bounds one CQL query (one page of a paged read): room for a slow
	// replica or a GC pause of Cassandra's, without letting one stuck query hold a row for long.
	//
	// Both timeouts must fit in the least lease validity a worker has in steady state, TTL − 2 ×
	// renewal of the elements it receives (a demand is answered at the next renewal at the latest),
	// and the guard wants the timeout plus its 100 ms margin. product.md's lease defaults (TTL 10 s,
	// renewal 2 s) leave 6 s: room for both. A worker whose timeouts do not fit says so (LeaseFit).
	DefaultQueryTimeout = time.Second
	// DefaultExecTimeout bounds one execution: what real downstreams need for a saga step (a
	// payment provider's p99.9 is seconds, not milliseconds). See DefaultQueryTimeout for the lease
	// it must fit in.
	DefaultExecTimeout = 5 * time.Second
	// DefaultMarkerMargin is added to the execution timeout for the IN_PROGRESS marker's TTL.
	DefaultMarkerMargin = 10 * time.Second
	// DefaultMarkerRetention is how long a COMMITTED marker is kept: longer than any transaction
	// stays in the directory.
	DefaultMarkerRetention = 7 * 24 * time.Hour
	// DefaultMaxAttempts is the number of executions after which a transient failure is
	// dead-lettered.
	DefaultMaxAttempts = 10
	// DefaultMaxRetryDelay caps the backoff L × 2^attempt of a re-recorded transient failure.
	DefaultMaxRetryDelay = 60 * time.Minute
	// DefaultIdleBackoff is how long Run waits after a cycle that found nothing to do, or while
	// the guard refuses (no lease yet, or it expired).
	DefaultIdleBackoff = time.Second
	// DefaultPauseSweepEvery is how often a paused ring is swept (sweep.go): rarely enough to cost
	// a paused ring next to nothing, and 24 times within the day of margin a kept bucket's
	// markers have left when it must be carried.
	DefaultPauseSweepEvery = time.Hour
)

// ClockCheck says whether the worker's clock may be trusted; *clockcheck.Monitor is one.
type ClockCheck interface {
	Status() clockcheck.Status
}

// Config configures a Worker. Zero values mean the documented defaults.
//
// The lease bounds the timeouts: the guard refuses an operation unless the lease has its timeout
// plus the guard margin left, and a lease has TTL − 2 × renewal left at worst. QueryTimeout and
// ExecTimeout must fit in that, or the guard refuses queries or executions for part of every
// renewal period; Scanner.LeaseFit says when they do not.
type Config struct {
	// Region, Cluster and Service name the ring and the partition keys of every table. Required.
	Region  string
	Cluster string
	Service string
	// WorkerID is the lease owner written into IN_PROGRESS markers and sent to executors. Required.
	WorkerID string

	// WindowMinutes is the window length L: it divides 1440. Default DefaultWindowMinutes.
	WindowMinutes int
	// LookbackDays is the minimum history checked (today and the LookbackDays days before it),
	// never a reason to skip an older day. Default DefaultLookbackDays.
	LookbackDays int
	// MaxClockOffset is how far any clock may be off: a window is read only once the clock is that
	// far past its start, and deleted once that far past its end. Default DefaultMaxClockOffset.
	MaxClockOffset time.Duration

	// Concurrency bounds the executions in flight. Default DefaultConcurrency.
	Concurrency int
	// (The page size of bucket reads is the Store's: cassandra.StoreConfig.PageSize.)
	// QueryTimeout bounds each CQL query and is what the guard demands before one.
	// Default DefaultQueryTimeout.
	QueryTimeout time.Duration
	// ExecTimeout bounds each execution and is what the guard demands before one.
	// Default DefaultExecTimeout.
	ExecTimeout time.Duration
	// MarkerMargin is added to ExecTimeout for the TTL of an IN_PROGRESS marker. Default DefaultMarkerMargin.
	MarkerMargin time.Duration
	// MarkerRetention is the TTL of a COMMITTED or DEAD_LETTERED marker and of a floor. It must be
	// more than two days: a bucket is carried once its handled rows' markers have less than a day
	// left (carryMargin), and a shorter retention would carry every kept bucket on first sight.
	// Default DefaultMarkerRetention.
	MarkerRetention time.Duration
	// Policies is the retry policy of every step (--retry-policy): its attempts, its longest
	// delay, and how its answers are classified (an executor classifies; the HTTP executor takes
	// the same Set). The zero Set is the built-in policy with MaxAttempts and MaxRetryDelay.
	Policies retrypolicy.Set
	// NoBreaker turns the circuit breaker off: every execution the controls admit is sent, however
	// many transient answers came before (for a downstream with a breaker of its own, and to measure
	// what the breaker saves).
	NoBreaker bool
	// MaxAttempts is the number of executions after which a transient failure is dead-lettered,
	// for a zero Policies. Default DefaultMaxAttempts.
	MaxAttempts int
	// MaxRetryDelay caps the delay L × 2^attempt before a transient failure is retried, for a
	// zero Policies. Default DefaultMaxRetryDelay.
	MaxRetryDelay time.Duration
	// MaxRate caps the executions per second (--max-rate), below this worker's share of the
	// ring's rate limit when the operator set one (the lease's controls). 0: no cap.
	MaxRate float64
	// IdleBackoff is Run's pause after a cycle with nothing to do or a refused lease.
	// Default DefaultIdleBackoff.
	IdleBackoff time.Duration
	// PauseSweepEvery is how long a whole-ring pause lasts before each pause sweep: a traversal
	// that executes nothing and only checks rows against their markers, so that a bucket kept
	// through a long pause is carried before its handled rows' markers expire. At most half a
	// day (half the carry margin). Default DefaultPauseSweepEvery.
	PauseSweepEvery time.Duration

	// Clock tells the time: the wall clock (UTC) for windows and the same reading for the guard.
	// Default lease.SystemClock. Tests inject a manual clock shared with the guard.
	Clock lease.Clock
	// WriteClock is the clock Cassandra writes are stamped with (the Store's, whose default is
	// lease.SystemClock too): a checked delete's tombstone is stamped from its reading, so it
	// must be the clock the max_clock_offset bound holds for. Default lease.SystemClock. Tests
	// whose Clock is manual keep this one on the clock their Store stamps writes with.
	WriteClock lease.Clock
	// ClockCheck, when set, judges Clock against Cassandra's (a *clockcheck.Monitor measuring the
	// same clock, with MaxClockOffset): while it says untrusted, Run starts no cycle, and
	// ring.report carries its figures. Giving the ranges back is the lease client's part (the
	// worker command leaves the ring and rejoins). Nil: unchecked.
	ClockCheck ClockCheck
	// CycleEnded, when set, is told how each cycle Run starts ended: nil when it ran to its end,
	// its error when it failed (a query at the configured consistency, most often). Cycles the
	// guard stopped, and those a stop ended, are not told: they say nothing of Cassandra. The
	// worker command's /readyz follows it: connecting to one node is not enough when every
	// LOCAL_QUORUM query fails. Nil: not told.
	CycleEnded func(err error)
	// Logger receives the worker's logs. The zero value logs nothing. The scanner adds component
	// and worker_id to every line, so a logger given here carries neither.
	Logger zerolog.Logger
}

// withDefaults fills every zero field with its default.
func (c Config) withDefaults() Config {
	if c.WindowMinutes == 0 {
		c.WindowMinutes = DefaultWindowMinutes
	}
	if c.LookbackDays == 0 {
		c.LookbackDays = DefaultLookbackDays
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = DefaultMaxClockOffset
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.ExecTimeout == 0 {
		c.ExecTimeout = DefaultExecTimeout
	}
	if c.MarkerMargin == 0 {
		c.MarkerMargin = DefaultMarkerMargin
	}
	if c.MarkerRetention == 0 {
		c.MarkerRetention = DefaultMarkerRetention
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxRetryDelay == 0 {
		c.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if c.Policies.Default.MaxAttempts == 0 { // the zero Set: no policy file
		c.Policies.Default = retrypolicy.Policy{MaxAttempts: c.MaxAttempts, MaxDelay: c.MaxRetryDelay}
	}
	if c.IdleBackoff == 0 {
		c.IdleBackoff = DefaultIdleBackoff
	}
	if c.PauseSweepEvery == 0 {
		c.PauseSweepEvery = DefaultPauseSweepEvery
	}
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	if c.WriteClock == nil {
		c.WriteClock = lease.SystemClock{}
	}
	return c
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// Validate reports the first problem of c (after defaults), wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if err := (lease.RingKey{Region: c.Region, Cluster: c.Cluster, Service: c.Service}).Validate(); err != nil {
		return bad("%v", err)
	}
	if err := window.ValidateLength(c.WindowMinutes); err != nil {
		return bad("%v", err)
	}
	switch {
	case c.WorkerID == "":
		return bad("worker id is empty")
	case c.LookbackDays < 0:
		return bad("lookback days %d is negative", c.LookbackDays)
	case c.LookbackDays > 366:
		// Last year's and this year's days are always listed; a longer lookback adds nothing.
		return bad("lookback days %d is more than a year", c.LookbackDays)
	case c.MaxClockOffset < 0:
		return bad("max clock offset %v is negative", c.MaxClockOffset)
	case c.MaxClockOffset >= time.Duration(c.WindowMinutes)*time.Minute:
		// A window must close to writers before the next one does.
		return bad("max clock offset %v must be shorter than a window (%d min)", c.MaxClockOffset, c.WindowMinutes)
	case c.Concurrency < 1:
		return bad("concurrency %d must be at least 1", c.Concurrency)
	case c.QueryTimeout <= 0 || c.ExecTimeout <= 0:
		return bad("timeouts must be positive (query %v, exec %v)", c.QueryTimeout, c.ExecTimeout)
	case c.MarkerMargin < 0:
		return bad("marker margin %v is negative", c.MarkerMargin)
	case c.MarkerRetention <= 2*carryMargin:
		// A kept bucket is carried once a handled row's marker has less than carryMargin left; a
		// retention not well above it would carry every kept bucket the first time it is seen.
		return bad("marker retention %v (Config.MarkerRetention; the worker binary has no flag for it and keeps %v) must be more than twice the carry margin %v: a kept bucket is carried once its markers have less than the margin left",
			c.MarkerRetention, DefaultMarkerRetention, carryMargin)
	case c.MaxAttempts < 1:
		return bad("max attempts %d must be at least 1", c.MaxAttempts)
	case c.MaxRetryDelay < 0:
		// window.Ahead never retries earlier than the next window, whatever the cap.
		return bad("max retry delay %v is negative", c.MaxRetryDelay)
	case !(c.MaxRate >= 0) || math.IsInf(c.MaxRate, 1): // written so that NaN is refused too
		return bad("max rate %v must be a finite number of executions per second, or 0 for none", c.MaxRate)
	case c.IdleBackoff < 0:
		return bad("idle backoff %v is negative", c.IdleBackoff)
	case c.PauseSweepEvery < 0 || c.PauseSweepEvery > carryMargin/2:
		// A marker has carryMargin left when a sweep must see it: two sweeps at least fall in it.
		return bad("pause sweep every %v must be positive and at most half the carry margin %v", c.PauseSweepEvery, carryMargin)
	}
	return nil
}
