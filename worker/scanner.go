package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Guard is the TimeWindowGuard as the worker uses it; *lease.Guard satisfies it.
type Guard interface {
	// Check returns the current lease if an operation needing need can start now.
	Check(need time.Duration) (lease.Lease, error)
	// CheckToken is Check plus: token lies in the lease's ranges.
	CheckToken(token int64, need time.Duration) (lease.Lease, error)
	// CheckNode0 is Check plus: the lease makes this worker Node-0.
	CheckNode0(need time.Duration) (lease.Lease, error)
	// Current returns the lease held, valid or not: its controls and its timing.
	Current() (lease.Lease, bool)
	// Margin is what the guard demands beyond an operation's timeout.
	Margin() time.Duration
}

var _ Guard = (*lease.Guard)(nil)

// Scanner is a retry worker's data plane: it traverses the directory, executes what it finds in
// its lease's token ranges, compacts what it finished, and, as Node-0, compacts the directory.
// It is safe for concurrent use; run one Run (or one Cycle at a time) per Scanner.
type Scanner struct {
	cfg   Config
	store Store
	guard Guard
	exec  Executor
	log   zerolog.Logger

	sem      chan struct{} // one slot per execution in flight
	inflight *inflight
	busy     sync.Map // txKey -> struct{}: steps being executed by this process right now
	stats    Stats    // live counters, touched only through sync/atomic (see count)

	breakers  *breakers
	throttle  *throttle
	tokenTurn chan struct{} // the one row waiting for a token of the throttle
	ctlLog    controlsLog
	refusals  refusalLog
	kept      keptLog
	fit       fitLog
	backlog   backlog
	sweeps    pauseSweeps
	rescans   rescans
}

// txKey names one step of one transaction, the unit of a STRICT marker.
type txKey struct{ id, span string }

// New checks cfg and builds a Scanner.
func New(cfg Config, store Store, guard Guard, exec Executor) (*Scanner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || guard == nil || exec == nil {
		return nil, fmt.Errorf("%w: store, guard and executor are required", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	return &Scanner{
		cfg:       cfg,
		store:     store,
		guard:     guard,
		exec:      exec,
		log:       cfg.Logger.With().Str("component", "worker").Str("worker_id", cfg.WorkerID).Logger(),
		sem:       make(chan struct{}, cfg.Concurrency),
		inflight:  newInflight(),
		breakers:  newBreakers(slices.Sorted(maps.Keys(cfg.Policies.Steps)), cfg.NoBreaker),
		throttle:  newThrottle(cfg.MaxRate),
		tokenTurn: make(chan struct{}, 1),
	}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Scanner) Config() Config { return s.cfg }

// Stats returns a snapshot of the counters.
func (s *Scanner) Stats() Stats { return snapshot(&s.stats) }

// Drain returns once no operation in flight may touch a token that old leased and next does not
// (nor, when next takes Node-0 away, any Node-0 operation). The lease client calls it after
// switching the guard to next and before releasing old's tokens: from the switch on the guard
// refuses new operations on them, and every operation under way is bounded by its timeout.
func (s *Scanner) Drain(ctx context.Context, old, next lease.Lease) error {
	dropped := old.Ranges.Subtract(next.Ranges)
	node0 := old.IsNode0() && !next.IsNode0()
	return s.inflight.wait(ctx, dropped, node0)
}

func (s *Scanner) now() time.Time { return s.cfg.Clock.Now() }

// refused counts, logs (a line every refusalLogEvery at most) and passes on a guard refusal.
func (s *Scanner) refused(err error) error {
	if !errors.Is(err, lease.ErrNotNode0) {
		s.count(&s.stats.GuardRefusals)
		s.refusals.add(s, err, s.now())
	}
	return err
}

// failed counts and passes on an error that is not a guard refusal.
func (s *Scanner) failed(err error) error {
	if err != nil && !lease.IsGuardError(err) && !errors.Is(err, ErrStopped) {
		s.count(&s.stats.Errors)
	}
	return err
}

// errStalled marks the refusal of an operation whose goroutine stalled past the operation's
// deadline between the guard's check and its start: the lease may have ended meanwhile, or may
// not, so a new check decides whether to try again (settleOn does, for the writes that settle a
// call).
var errStalled = errors.New("stalled past the operation's deadline after the guard's check")

// run is the one way the worker touches Cassandra or an executor: it registers the operation for
// Drain, asks the guard (check) for an operation of need, and runs fn bounded by need.
func (s *Scanner) run(ctx context.Context, scope opScope, need time.Duration,
	check func(time.Duration) (lease.Lease, error), fn func(ctx context.Context, l lease.Lease) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	end := s.inflight.begin(scope) // before the check: see inflight
	defer end()
	// The operation's deadline counts from before the check, which found the lease valid for need
	// plus margin from then on: however long this goroutine is stalled after the check (a GC
	// pause, a SIGSTOP), the deadline never outlives the lease. Executors stop at it (the stock
	// HTTP executor checks it again as each request is written). The Store checks it before every
	// query; gocql itself may still send a query whose context just ended (it picks at random
	// between a done context and a free stream), so a late CQL write stays possible, which the
	// data plane tolerates: every write is idempotent, and a bucket is deleted only when all its
	// rows are finished, whoever finished them.
	deadline := time.Now().Add(need)
	l, err := check(need)
	if err != nil {
		return s.refused(err)
	}
	opCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, err)
	}
	if !time.Now().Before(deadline) {
		// Stalled past the deadline between the check and here: the lease may have ended.
		return s.refused(fmt.Errorf("%w: %w", lease.ErrLeaseTooShort, errStalled))
	}
	return s.failed(fn(opCtx, l))
}

// onToken runs a query on the data of the instance whose token is token.
func (s *Scanner) onToken(ctx context.Context, token int64, fn func(ctx context.Context) error) error {
	return s.run(ctx, tokenScope(token), s.cfg.QueryTimeout,
		func(need time.Duration) (lease.Lease, error) { return s.guard.CheckToken(token, need) },
		func(ctx context.Context, _ lease.Lease) error { return fn(ctx) })
}

// onDirectory runs a read of tier 1 or 2, which belong to no token.
func (s *Scanner) onDirectory(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.run(ctx, opScope{}, s.cfg.QueryTimeout, s.guard.Check,
		func(ctx context.Context, _ lease.Lease) error { return fn(ctx) })
}

// onNode0 runs one of Node-0's queries.
func (s *Scanner) onNode0(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.run(ctx, opScope{node0: true}, s.cfg.QueryTimeout, s.guard.CheckNode0,
		func(ctx context.Context, _ lease.Lease) error { return fn(ctx) })
}
