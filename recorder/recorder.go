package recorder

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// Config configures a Recorder. The zero value of a field means its default.
type Config struct {
	// Region, Cluster and Service name the ring; empty means the store's, and anything else
	// must equal the store's.
	Region, Cluster, Service string
	// InstanceID is this process's instance id (required): non-empty, valid UTF-8, and unique
	// among the processes that write for the service at one time (a pod name).
	InstanceID string
	// WindowMinutes is the service's window length L. Default: the store's.
	WindowMinutes int
	// BucketSize is the number of rows a writer puts in one bucket of a window. Default 50,000.
	BucketSize int
	// WriteBudget is the least time a normal write may have before its target window starts:
	// a Record with less than that left before W+1 starts writes into W+2, so that it never
	// writes into a window its clock has entered. Default 250 ms.
	WriteBudget time.Duration
	// Backdate makes Record write into the window after the one the clock showed Backdate ago:
	// a window that may already be readable, written with the late protocol. For imports of a
	// legacy queue and for tests; zero in production.
	Backdate time.Duration
	// Clock is the time source. Default lease.SystemClock.
	Clock lease.Clock
	// ClockCheck, when set, judges Clock against Cassandra's (a *clockcheck.Monitor measuring the
	// same clock): while it is untrusted every Record and RecordAt returns ErrClockUntrusted and
	// writes nothing, since a row stamped by a clock beyond the bound could be hidden by a
	// worker's delete and lost. A process that records measures first (Monitor.Measure) and only
	// then records. Required unless UncheckedClock.
	ClockCheck ClockCheck
	// UncheckedClock opts out of ClockCheck: New refuses a Config with neither. The recorder then
	// stamps its rows and picks its windows by a clock nobody compares with Cassandra's, and
	// what it risks is losing the failures it answered "recorded": a clock behind the workers'
	// by more than the bound stamps rows older than the tombstone of a worker's checked delete,
	// which hides them for good; a clock ahead writes into windows the workers have drained.
	// Only for callers whose clock is checked some other way or does not stamp writes (a manual
	// test clock beside a store with its own write clock, a benchmark on one host).
	UncheckedClock bool
	// CacheSize bounds the number of directory rows remembered as written. Default 100,000.
	CacheSize int
	// AllowWeakConsistency accepts a store whose session runs below a quorum (ONE, LOCAL_ONE, ...),
	// which New otherwise refuses: a worker reading at such a level can miss what was written.
	AllowWeakConsistency bool
	// Logger is the parent logger; the recorder adds component=recorder and instance_id, so a
	// logger given here carries neither. Default: none.
	Logger *zerolog.Logger
}

// ClockCheck says whether the recorder's clock may be trusted; *clockcheck.Monitor is one.
type ClockCheck interface {
	Status() clockcheck.Status
}

// Defaults of Config.
const (
	DefaultBucketSize  = 50_000
	DefaultWriteBudget = 250 * time.Millisecond
	DefaultCacheSize   = 100_000
)

// lateBucketBase is the lowest bucket index the late protocol uses. Normal writers count
// buckets up from zero; a late write takes a fresh random index above this, so that it never
// adds rows to a bucket a worker may already have read (and be about to delete).
const lateBucketBase = 1 << 24

// Failure is one failed saga step to retry.
type Failure struct {
	// TransactionID keys the transaction in the primary event store (required).
	TransactionID string
	// AllocationKey and ImplType are copied to tier 5 (allocation_key, stacksaga_impl_type).
	AllocationKey string
	ImplType      string
	// Attempt is 0 for a first failure; a worker re-recording a transient failure passes the
	// attempt it is scheduling.
	Attempt int
	// Replay is 0 for a failure as its service records it; a replay of a dead letter records
	// the step's next replay generation.
	Replay int
	// AddedAt is when the failure happened. Default: the recorder's clock.
	AddedAt time.Time
	// InstanceID overrides the recorder's own instance id: a worker re-records a failure under
	// the instance id it was found under. Empty means the recorder's.
	InstanceID string
}

// Stats are the recorder's counters.
type Stats struct {
	Failures   uint64 // failures recorded successfully
	Errors     uint64 // Record and RecordAt calls that returned an error (nothing recorded, or not all)
	Statements uint64 // requests sent to Cassandra, successful or not
	// ClockRefusals counts Record and RecordAt calls refused for an untrusted clock (also in Errors).
	ClockRefusals uint64
	// CachedRows is the number of directory rows currently remembered as written.
	CachedRows int
}

// Recorder records failures into the retry directory. It is safe for concurrent use.
type Recorder struct {
	store    *cassandra.Store
	cfg      Config
	clock    lease.Clock
	log      zerolog.Logger
	dirs     *dirCache
	failures atomic.Uint64
	errors   atomic.Uint64
	refusals atomic.Uint64

	mu        sync.Mutex
	counters  map[counterKey]*atomic.Int64
	lastSweep window.Window
}

type counterKey struct {
	window   window.Window
	instance string
}

// New makes a Recorder that writes through store (which it copies, to count its own
// statements).
func New(store *cassandra.Store, cfg Config) (*Recorder, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrConfig)
	}
	ring := store.Ring()
	for _, f := range []struct {
		name     string
		got      *string
		fromRing string
	}{{"region", &cfg.Region, ring.Region}, {"cluster", &cfg.Cluster, ring.Cluster}, {"service", &cfg.Service, ring.Service}} {
		if *f.got == "" {
			*f.got = f.fromRing
		}
		if *f.got != f.fromRing {
			return nil, fmt.Errorf("%w: %s %q but the store serves %q", ErrConfig, f.name, *f.got, f.fromRing)
		}
	}
	if err := cassandra.ValidateInstanceID(cfg.InstanceID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	switch {
	case cfg.ClockCheck == nil && !cfg.UncheckedClock:
		return nil, fmt.Errorf("%w: no ClockCheck: a recorder whose clock is off Cassandra's by more than max_clock_offset / 2 writes rows a worker's delete can hide; pass a *clockcheck.Monitor measured first, or set UncheckedClock to take that risk", ErrConfig)
	case cfg.ClockCheck != nil && cfg.UncheckedClock:
		return nil, fmt.Errorf("%w: both a ClockCheck and UncheckedClock", ErrConfig)
	}
	if c := store.Consistency(); cassandra.WeakConsistency(c) && !cfg.AllowWeakConsistency {
		return nil, fmt.Errorf("%w: %w: the store's session runs at %v, below a quorum, so a worker that takes over a range can miss what this recorder wrote; use LOCAL_QUORUM or QUORUM, or set AllowWeakConsistency", ErrConfig, cassandra.ErrWeakConsistency, c)
	}
	if cfg.WindowMinutes == 0 {
		cfg.WindowMinutes = store.WindowMinutes()
	}
	if cfg.WindowMinutes != store.WindowMinutes() {
		return nil, fmt.Errorf("%w: window length %d but the store names windows of %d", ErrConfig, cfg.WindowMinutes, store.WindowMinutes())
	}
	if cfg.BucketSize == 0 {
		cfg.BucketSize = DefaultBucketSize
	}
	if cfg.WriteBudget == 0 {
		cfg.WriteBudget = DefaultWriteBudget
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Clock == nil {
		cfg.Clock = lease.SystemClock{}
	}
	switch {
	case cfg.BucketSize < 1:
		return nil, fmt.Errorf("%w: bucket size %d", ErrConfig, cfg.BucketSize)
	case cfg.WriteBudget < 0 || cfg.Backdate < 0:
		return nil, fmt.Errorf("%w: negative write budget or backdate", ErrConfig)
	case cfg.CacheSize < 1:
		return nil, fmt.Errorf("%w: cache size %d", ErrConfig, cfg.CacheSize)
	}
	log := zerolog.Nop()
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	return &Recorder{
		store:    store.WithOwnCounter(),
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      log.With().Str("component", "recorder").Str("instance_id", cfg.InstanceID).Logger(),
		dirs:     newDirCache(cfg.CacheSize),
		counters: map[counterKey]*atomic.Int64{},
	}, nil
}

// Stats returns the recorder's counters; Statements/Failures is the cost of a failure.
func (r *Recorder) Stats() Stats {
	return Stats{Failures: r.failures.Load(), Errors: r.errors.Load(), Statements: r.store.Statements(),
		ClockRefusals: r.refusals.Load(), CachedRows: r.dirs.len()}
}

// clockTrusted returns ErrClockUntrusted, with the figures, while the clock check says the clock
// is beyond the bound or has no fresh estimate.
func (r *Recorder) clockTrusted() error {
	if r.cfg.ClockCheck == nil {
		return nil
	}
	if err := r.cfg.ClockCheck.Status().Err(); err != nil {
		r.refusals.Add(1)
		return fmt.Errorf("%w: %w", ErrClockUntrusted, err)
	}
	return nil
}

// Record writes one failure into W+1 (or, with Backdate, into a past window by the late
// protocol) and returns the bucket it landed in.
func (r *Recorder) Record(ctx context.Context, f Failure) (cassandra.BucketKey, error) {
	key, err := r.record(ctx, f)
	if err != nil {
		r.errors.Add(1)
		r.log.Debug().Err(err).Str("transaction_id", f.TransactionID).Msg("record failed")
	}
	return key, err
}

func (r *Recorder) record(ctx context.Context, f Failure) (cassandra.BucketKey, error) {
	if err := r.clockTrusted(); err != nil {
		return cassandra.BucketKey{}, err
	}
	now := r.clock.Now()
	if r.cfg.Backdate > 0 {
		target, err := window.WriteTarget(now.Add(-r.cfg.Backdate), r.cfg.WindowMinutes)
		if err != nil {
			return cassandra.BucketKey{}, err
		}
		keys, err := r.recordLate(ctx, now, target, []Failure{f})
		if err != nil {
			return cassandra.BucketKey{}, err
		}
		return keys[0], nil
	}
	target, err := window.WriteTarget(now, r.cfg.WindowMinutes)
	if err != nil {
		return cassandra.BucketKey{}, err
	}
	if target.Start().Sub(now) < r.cfg.WriteBudget {
		target = target.Next()
	}
	return r.recordAhead(ctx, now, target, f)
}

// RecordAt writes failures into target. A target that starts at least WriteBudget after the
// clock is written by the normal protocol, one failure at a time; any other target (its time
// has come, or is about to) by the late protocol, which is safe while workers read the window:
// all of fs then goes into fresh buckets published bottom-up.
func (r *Recorder) RecordAt(ctx context.Context, target window.Window, fs ...Failure) error {
	err := r.recordAt(ctx, target, fs)
	if err != nil {
		r.errors.Add(1)
		r.log.Debug().Err(err).Stringer("window", target).Int("failures", len(fs)).Msg("record at failed")
	}
	return err
}

func (r *Recorder) recordAt(ctx context.Context, target window.Window, fs []Failure) error {
	if _, err := window.New(target.Day, target.Minute, target.Length); err != nil || target.Length != r.cfg.WindowMinutes {
		return fmt.Errorf("%w: %s (service windows are %d minutes)", ErrWindow, target, r.cfg.WindowMinutes)
	}
	for i, f := range fs {
		// The clock is judged and read again for every failure: a long list may run into the
		// target's start, and what is left then goes by the late protocol.
		if err := r.clockTrusted(); err != nil {
			return err
		}
		now := r.clock.Now()
		if target.Start().Sub(now) < r.cfg.WriteBudget {
			_, err := r.recordLate(ctx, now, target, fs[i:])
			return err
		}
		if _, err := r.recordAhead(ctx, now, target, f); err != nil {
			return err
		}
	}
	return nil
}

func (r *Recorder) prepare(f *Failure, now time.Time) error {
	if f.TransactionID == "" {
		return fmt.Errorf("%w: empty transaction id", ErrFailure)
	}
	if f.InstanceID == "" {
		f.InstanceID = r.cfg.InstanceID
	}
	if err := cassandra.ValidateInstanceID(f.InstanceID); err != nil {
		return fmt.Errorf("%w: %w", ErrFailure, err)
	}
	if f.AddedAt.IsZero() {
		f.AddedAt = now
	}
	return nil
}

func (f Failure) row() cassandra.Transaction {
	return cassandra.Transaction{ID: f.TransactionID, AddedAt: f.AddedAt, AllocationKey: f.AllocationKey, ImplType: f.ImplType, Attempt: f.Attempt, Replay: f.Replay}
}

// recordAhead is the normal protocol for a target that has not started: directory rows top
// down, each at most once per process, then the tier-5 row. Everything must be done before the
// target starts by the recorder's clock: a reader may open the window maxClockOffset after that.
func (r *Recorder) recordAhead(ctx context.Context, now time.Time, target window.Window, f Failure) (cassandra.BucketKey, error) {
	if err := r.prepare(&f, now); err != nil {
		return cassandra.BucketKey{}, err
	}
	r.sweepIfNewWindow(now)
	ctx, cancel := context.WithTimeout(ctx, target.Start().Sub(now))
	defer cancel()

	key := cassandra.BucketKey{Window: target, InstanceID: f.InstanceID, Bucket: r.nextBucket(target, f.InstanceID)}
	if err := r.ensureDirectory(ctx, key); err != nil {
		return cassandra.BucketKey{}, fmt.Errorf("recorder: directory of %s: %w", target, err)
	}
	if err := r.store.InsertTransaction(ctx, key, f.row()); err != nil {
		return cassandra.BucketKey{}, fmt.Errorf("recorder: tier 5 row %s in %s: %w", f.TransactionID, target, err)
	}
	r.failures.Add(1)
	return key, nil
}

// ensureDirectory writes, in order, the tier 1 to tier 4 rows that lead to key's bucket, skipping
// those this process already wrote.
func (r *Recorder) ensureDirectory(ctx context.Context, key cassandra.BucketKey) error {
	w, id := key.Window, key.InstanceID
	st := r.store
	steps := []struct {
		key    dirKey
		expiry time.Time
		write  func(context.Context) error
	}{
		{dirKey{level: 1, day: w.Day}, w.Day.AddDays(1).Time(),
			func(ctx context.Context) error { return st.InsertDay(ctx, w.Day) }},
		{dirKey{level: 2, day: w.Day, minute: w.Minute}, w.Start(),
			func(ctx context.Context) error { return st.InsertWindow(ctx, w) }},
		{dirKey{level: 3, day: w.Day, minute: w.Minute, instance: id}, w.Start(),
			func(ctx context.Context) error { return st.InsertInstance(ctx, w, id) }},
		{dirKey{level: 4, day: w.Day, minute: w.Minute, instance: id, bucket: key.Bucket}, w.Start(),
			func(ctx context.Context) error { return st.InsertBucket(ctx, w, id, key.Bucket) }},
	}
	for _, s := range steps {
		if err := r.dirs.ensure(ctx, s.key, s.expiry, s.write); err != nil {
			return err
		}
	}
	return nil
}

// nextBucket counts the row into its window and returns its bucket: row n goes to n/BucketSize.
func (r *Recorder) nextBucket(w window.Window, instance string) int {
	k := counterKey{window: w, instance: instance}
	r.mu.Lock()
	c, ok := r.counters[k]
	if !ok {
		c = new(atomic.Int64)
		r.counters[k] = c
	}
	r.mu.Unlock()
	n := c.Add(1) - 1
	return int(n / int64(r.cfg.BucketSize))
}

// sweepIfNewWindow forgets the counters and cached rows of windows that have started, once per
// window of the clock, so that memory follows the live windows only.
func (r *Recorder) sweepIfNewWindow(now time.Time) {
	cur, err := window.Of(now, r.cfg.WindowMinutes)
	if err != nil {
		return
	}
	r.mu.Lock()
	if cur == r.lastSweep {
		r.mu.Unlock()
		return
	}
	r.lastSweep = cur
	for k := range r.counters {
		if !now.Before(k.window.Start()) {
			delete(r.counters, k)
		}
	}
	r.mu.Unlock()
	r.dirs.sweep(now)
}

// recordLate is the late protocol, for a target a worker may already be reading (see
// docs/schema.md): the rows go into fresh buckets that no worker can have seen, and the path
// to them is published bottom-up (tier 5, tier 4, tier 3, tier 2, window checkpoint, tier 1,
// day checkpoint), so that every directory row is written after the rows it leads to and after
// any delete a worker or Node-0 may have made of it. Nothing is cached: a row deleted since the
// last late write must be written again.
func (r *Recorder) recordLate(ctx context.Context, now time.Time, target window.Window, fs []Failure) ([]cassandra.BucketKey, error) {
	if target.Day.Year < now.UTC().Year()-1 {
		return nil, fmt.Errorf("%w: %s", ErrTooOld, target)
	}
	byInstance := map[string][]cassandra.Transaction{}
	var order []string
	for _, f := range fs {
		if err := r.prepare(&f, now); err != nil {
			return nil, err
		}
		if _, ok := byInstance[f.InstanceID]; !ok {
			order = append(order, f.InstanceID)
		}
		byInstance[f.InstanceID] = append(byInstance[f.InstanceID], f.row())
	}
	st := r.store
	keyOf := map[string]cassandra.BucketKey{}
	for _, id := range order {
		rows := byInstance[id]
		for len(rows) > 0 {
			n := min(len(rows), r.cfg.BucketSize)
			key := cassandra.BucketKey{Window: target, InstanceID: id, Bucket: lateBucketBase + rand.IntN(1<<30)}
			if err := st.InsertTransactions(ctx, key, rows[:n]); err != nil {
				return nil, fmt.Errorf("recorder: late rows into %s: %w", target, err)
			}
			if err := st.InsertBucket(ctx, target, id, key.Bucket); err != nil {
				return nil, fmt.Errorf("recorder: late tier 4 of %s: %w", target, err)
			}
			for _, t := range rows[:n] {
				keyOf[t.ID] = key
			}
			rows = rows[n:]
		}
		if err := st.InsertInstance(ctx, target, id); err != nil {
			return nil, fmt.Errorf("recorder: late tier 3 of %s: %w", target, err)
		}
	}
	publish := []struct {
		what string
		do   func(context.Context) error
	}{
		{"tier 2", func(ctx context.Context) error { return st.InsertWindow(ctx, target) }},
		{"window checkpoint", func(ctx context.Context) error { return st.LowerWindowCheckpoint(ctx, target.Day, target.Minute) }},
		{"tier 1", func(ctx context.Context) error { return st.InsertDay(ctx, target.Day) }},
		{"day checkpoint", func(ctx context.Context) error { return st.LowerDayCheckpoint(ctx, target.Day) }},
	}
	for _, p := range publish {
		if err := p.do(ctx); err != nil {
			return nil, fmt.Errorf("recorder: late %s of %s: %w", p.what, target, err)
		}
	}
	out := make([]cassandra.BucketKey, len(fs))
	for i, f := range fs {
		out[i] = keyOf[f.TransactionID]
	}
	r.failures.Add(uint64(len(fs)))
	r.log.Debug().Str("window", target.String()).Int("failures", len(fs)).Msg("late write published")
	return out, nil
}
