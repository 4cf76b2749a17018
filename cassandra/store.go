package cassandra

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/window"
)

// StoreConfig binds a Store to one keyspace and one ring's directory.
type StoreConfig struct {
	// Keyspace holds the tables (required).
	Keyspace string
	// Ring is the (region, cluster, service) whose directory the Store reads and writes;
	// markers are keyed by its Service (required).
	Ring lease.RingKey
	// WindowMinutes is the service's window length L, used to name the windows read back from
	// tier 2 (required; must divide 1440).
	WindowMinutes int
	// PageSize is the number of rows per page of paged reads. Default 1000; at least 100.
	PageSize int
	// Retries is how many times an idempotent statement is sent again after a failure that
	// Cassandra or the connection reported. Default 2; -1 means never.
	Retries int
	// Clock stamps every plain write (each statement and each batch, read once per statement,
	// so that a driver retry sends the same timestamp again). Default lease.SystemClock: the
	// process's wall clock. Compare-and-sets take Cassandra's own timestamps (Paxos ballots).
	Clock lease.Clock
	// SerialConsistency is the session's serial level (SERIAL or LOCAL_SERIAL, the default):
	// a read that must see every accepted compare-and-set (ReplayMark) runs at it.
	SerialConsistency string
}

// Store runs exactly the queries the data plane needs against one ring's directory. Every
// method takes ctx first, closes its iterators, and pages reads through a Scanner. Every
// statement but the compare-and-sets is idempotent (an upsert or a delete of a fixed key) and is
// marked so, which lets gocql retry it.
//
// Every plain write carries the Store's clock as its timestamp (a USING TIMESTAMP in a
// statement's text wins over it), not gocql's time.Now at the moment it writes the frame: the
// timestamp is the process's, chosen once, and the same on a retry. docs/schema.md says which
// timestamp each write and delete of the directory carries.
//
// A Store is safe for concurrent use.
type Store struct {
	session    *gocql.Session
	ring       lease.RingKey
	length     int
	pageSize   int
	stmts      map[string]string
	retry      gocql.RetryPolicy
	statements *atomic.Uint64
	clock      lease.Clock
	tracer     gocql.Tracer
	guard      func(context.Context) error
	serial     gocql.SerialConsistency
}

// NewStore checks cfg and prepares the statements' text for its keyspace.
func NewStore(session *gocql.Session, cfg StoreConfig) (*Store, error) {
	if session == nil {
		return nil, fmt.Errorf("%w: nil session", ErrConfig)
	}
	if err := ValidateKeyspace(cfg.Keyspace); err != nil {
		return nil, err
	}
	if err := cfg.Ring.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := window.ValidateLength(cfg.WindowMinutes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.PageSize < 100 {
		return nil, fmt.Errorf("%w: page size %d is below 100", ErrConfig, cfg.PageSize)
	}
	if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	if cfg.Clock == nil {
		cfg.Clock = lease.SystemClock{}
	}
	if cfg.SerialConsistency == "" {
		cfg.SerialConsistency = DefaultSerialConsistency
	}
	serial, err := ParseSerialConsistency(cfg.SerialConsistency)
	if err != nil {
		return nil, err
	}
	st := &Store{
		session:    session,
		ring:       cfg.Ring,
		length:     cfg.WindowMinutes,
		pageSize:   cfg.PageSize,
		stmts:      map[string]string{},
		statements: new(atomic.Uint64),
		clock:      cfg.Clock,
		serial:     serial,
	}
	if cfg.Retries > 0 {
		st.retry = &gocql.SimpleRetryPolicy{NumRetries: cfg.Retries}
	}
	for _, q := range allStatements {
		st.stmts[q] = inKeyspace(q, cfg.Keyspace)
	}
	return st, nil
}

var allStatements = []string{
	cqlInsertDay, cqlSelectDays, cqlSelectDay, cqlDeleteDay,
	cqlInsertWindow, cqlSelectWindows, cqlSelectWindow, cqlDeleteWindow,
	cqlInsertInstance, cqlSelectInstancesInRange, cqlSelectInstances, cqlSelectInstancesLimit, cqlDeleteInstance,
	cqlInsertBucket, cqlSelectBuckets, cqlDeleteBucket,
	cqlInsertTransaction, cqlSelectTransactions, cqlDeleteBucketPartition, cqlDeleteTransaction,
	cqlSelectWindowCheckpoint, cqlInsertWindowCheckpoint, cqlUpdateWindowCheckpoint,
	cqlSelectDayCheckpoint, cqlInsertDayCheckpoint, cqlUpdateDayCheckpoint,
	cqlSelectMarker, cqlSetFloor, cqlMarkInProgress, cqlMarkCommitted, cqlMarkDeadLettered,
	cqlInsertDeadLetter, cqlSelectDeadLetters, cqlMarkDeadLetterReplayed, cqlDeleteDeadLetter, cqlDeleteDeadLetterDay,
	cqlInsertReplayRun, cqlSelectReplayRun, cqlSelectDeadLetterMark,
}

// Ring is the ring whose directory the Store serves.
func (s *Store) Ring() lease.RingKey { return s.ring }

// WindowMinutes is the window length the Store names windows with.
func (s *Store) WindowMinutes() int { return s.length }

// Statements is the number of requests sent to Cassandra so far (every page and every retry
// counts), shared by every copy made with Traced. Benchmarks divide it by the work done.
func (s *Store) Statements() uint64 { return s.statements.Load() }

// WithOwnCounter returns a Store that shares everything with s except the statement counter,
// which starts at zero: a component (the recorder) can then report its own statements.
func (s *Store) WithOwnCounter() *Store {
	c := *s
	c.statements = new(atomic.Uint64)
	return &c
}

// WithGuard returns a Store that shares everything with s but calls guard before sending each
// statement (and each page of ReadBucketPage) and sends nothing when guard returns an error,
// which is returned as is. A worker passes its lease guard here, so that no query of its can
// run on an expired lease. Pages that gocql fetches on its own inside one scan of a directory
// partition are not checked again: those partitions are small.
func (s *Store) WithGuard(guard func(context.Context) error) *Store {
	c := *s
	c.guard = guard
	return &c
}

// WithWriteClock returns a Store that shares everything with s but stamps every plain write it
// sends (not the compare-and-sets, whose timestamps Paxos chooses, nor the statements that carry
// their own USING TIMESTAMP) with clock's reading instead of StoreConfig.Clock's. Tests use it to
// run writers whose clocks are off by a known amount.
func (s *Store) WithWriteClock(clock lease.Clock) *Store {
	c := *s
	c.clock = clock
	return &c
}

// stampNow is the reading this Store's plain writes are stamped with.
func (s *Store) stampNow() time.Time { return s.clock.Now() }

func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		// Past its deadline already (a caller stalled after its lease check): do not send.
		return fmt.Errorf("cassandra: not sent: %w", err)
	}
	if s.guard == nil {
		return nil
	}
	return s.guard(ctx)
}

// Traced returns a Store that shares everything with s but asks Cassandra to trace every
// statement and hands each trace id to t. For tests (see TombstoneTracer), never production.
func (s *Store) Traced(t gocql.Tracer) *Store {
	c := *s
	c.tracer = t
	return &c
}

// kind is what a statement does, which decides its retries and its timestamp.
type kind int

const (
	// read is idempotent and writes nothing: its timestamp does not matter.
	read kind = iota
	// write is a plain upsert or delete, idempotent: stamped with the Store's clock.
	write
	// compareAndSet is a Paxos round, never retried (whether it applied is the answer), and
	// sent without a timestamp: Cassandra stamps it with its ballot.
	compareAndSet
)

// query builds a statement; idempotent statements get the Store's retry policy.
func (s *Store) query(ctx context.Context, stmt string, k kind, args ...any) *gocql.Query {
	text, ok := s.stmts[stmt]
	if !ok {
		panic("cassandra: statement not registered in allStatements")
	}
	q := s.session.Query(text, args...).WithContext(ctx).Observer(counter{s.statements})
	switch k {
	case write:
		q = q.WithTimestamp(s.timestamp())
	case compareAndSet:
		q = q.DefaultTimestamp(false)
	}
	if k != compareAndSet {
		q = q.Idempotent(true)
		if s.retry != nil {
			q = q.RetryPolicy(s.retry)
		}
	}
	if s.tracer != nil {
		q = q.Trace(s.tracer)
	}
	return q
}

// timestamp is a write's timestamp in microseconds, read from the Store's clock once per
// statement: the Query keeps it, so a retry or a speculative execution sends the same one.
func (s *Store) timestamp() int64 { return s.stampNow().UnixMicro() }

func (s *Store) exec(ctx context.Context, stmt string, args ...any) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.query(ctx, stmt, write, args...).Exec()
}

// cas runs a compare-and-set (never retried: whether it applied is the answer).
func (s *Store) cas(ctx context.Context, stmt string, args ...any) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	return s.query(ctx, stmt, compareAndSet, args...).MapScanCAS(map[string]any{})
}

// scan runs a paged read and hands every row to each; the iterator is always closed.
func (s *Store) scan(ctx context.Context, stmt string, each func(gocql.Scanner) error, args ...any) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	iter := s.query(ctx, stmt, read, args...).PageSize(s.pageSize).Iter()
	sc := iter.Scanner()
	for sc.Next() {
		if err := each(sc); err != nil {
			_ = iter.Close()
			return err
		}
	}
	return sc.Err() // closes the iterator
}

// exists reads at most one row of a point query.
func (s *Store) exists(ctx context.Context, stmt string, args ...any) (bool, error) {
	found := false
	err := s.scan(ctx, stmt, func(gocql.Scanner) error { found = true; return nil }, args...)
	return found, err
}

type counter struct{ n *atomic.Uint64 }

func (c counter) ObserveQuery(context.Context, gocql.ObservedQuery) { c.n.Add(1) }
func (c counter) ObserveBatch(context.Context, gocql.ObservedBatch) { c.n.Add(1) }

// ValidateInstanceID accepts the instance ids Cassandra can store as a partition key.
func ValidateInstanceID(id string) error {
	if id == "" || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q", ErrInstanceID, id)
	}
	return nil
}

func day(d window.Date) time.Time { return d.Time() }

// CheckedDeleteTime is the timestamp of a delete that can race a writer (docs/schema.md,
// "Checked deletes"): checkedAt is the deleter's clock reading taken before it checked that the
// level below is empty, maxClockOffset the bound between any two processes' clocks. A writer
// within the bound that writes after the check stamps its row at checkedAt − maxClockOffset or
// later, so the row is newer than the tombstone and survives it (Cassandra's tombstone wins ties,
// hence the extra microsecond); every row written maxClockOffset before the check is hidden.
func CheckedDeleteTime(checkedAt time.Time, maxClockOffset time.Duration) time.Time {
	return checkedAt.Add(-maxClockOffset - time.Microsecond)
}

// micros is a write timestamp in Cassandra's unit.
func micros(at time.Time) int64 { return at.UnixMicro() }

// --- Tier 1 -------------------------------------------------------------------------------

// InsertDay writes the tier-1 row of a day.
func (s *Store) InsertDay(ctx context.Context, d window.Date) error {
	r := s.ring
	return s.exec(ctx, cqlInsertDay, r.Region, r.Cluster, r.Service, d.Year, day(d))
}

// ListDays lists the days of a year's partition from from on (inclusive), oldest first.
// Start from the year's DayCheckpoint so as not to read the tombstones of deleted days.
func (s *Store) ListDays(ctx context.Context, year int, from window.Date) ([]window.Date, error) {
	r := s.ring
	var out []window.Date
	err := s.scan(ctx, cqlSelectDays, func(sc gocql.Scanner) error {
		var t time.Time
		if err := sc.Scan(&t); err != nil {
			return err
		}
		out = append(out, window.DateOf(t))
		return nil
	}, r.Region, r.Cluster, r.Service, year, day(from))
	if err != nil {
		return nil, fmt.Errorf("cassandra: list days of %d: %w", year, err)
	}
	return out, nil
}

// HasDay reports whether the tier-1 row of a day exists.
func (s *Store) HasDay(ctx context.Context, d window.Date) (bool, error) {
	r := s.ring
	return s.exists(ctx, cqlSelectDay, r.Region, r.Cluster, r.Service, d.Year, day(d))
}

// DeleteDay deletes the tier-1 row of a day (Node-0 only, behind its gates) with a tombstone
// stamped at: it hides the row's cells written at or before at, in whatever order they arrive.
func (s *Store) DeleteDay(ctx context.Context, d window.Date, at time.Time) error {
	r := s.ring
	return s.exec(ctx, cqlDeleteDay, micros(at), r.Region, r.Cluster, r.Service, d.Year, day(d))
}

// --- Tier 2 -------------------------------------------------------------------------------

// InsertWindow writes the tier-2 row of a window.
func (s *Store) InsertWindow(ctx context.Context, w window.Window) error {
	r := s.ring
	return s.exec(ctx, cqlInsertWindow, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute)
}

// ListWindows lists the windows of a day from fromMinute on (inclusive), earliest first.
// Start from the day's WindowCheckpoint so as not to read the tombstones of deleted windows.
// Windows carry the Store's length; a row whose minute is not aligned to it (written under
// another length) is still returned, so that no work is hidden.
func (s *Store) ListWindows(ctx context.Context, d window.Date, fromMinute int) ([]window.Window, error) {
	r := s.ring
	var out []window.Window
	err := s.scan(ctx, cqlSelectWindows, func(sc gocql.Scanner) error {
		var m int
		if err := sc.Scan(&m); err != nil {
			return err
		}
		out = append(out, window.Window{Day: d, Minute: m, Length: s.length})
		return nil
	}, r.Region, r.Cluster, r.Service, day(d), fromMinute)
	if err != nil {
		return nil, fmt.Errorf("cassandra: list windows of %s: %w", d, err)
	}
	return out, nil
}

// HasWindow reports whether the tier-2 row of a window exists.
func (s *Store) HasWindow(ctx context.Context, w window.Window) (bool, error) {
	r := s.ring
	return s.exists(ctx, cqlSelectWindow, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute)
}

// DeleteWindow deletes the tier-2 row of a window (Node-0 only, behind both gates) with a
// tombstone stamped at (see DeleteDay).
func (s *Store) DeleteWindow(ctx context.Context, w window.Window, at time.Time) error {
	r := s.ring
	return s.exec(ctx, cqlDeleteWindow, micros(at), r.Region, r.Cluster, r.Service, day(w.Day), w.Minute)
}

// --- Tier 3 -------------------------------------------------------------------------------

// InsertInstance writes the tier-3 marker of an instance in a window, with Token(instanceID).
func (s *Store) InsertInstance(ctx context.Context, w window.Window, instanceID string) error {
	if err := ValidateInstanceID(instanceID); err != nil {
		return err
	}
	r := s.ring
	return s.exec(ctx, cqlInsertInstance, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute,
		Token(instanceID), instanceID)
}

// ListInstances lists the instance markers of a window whose token lies in rg (inclusive),
// in token order: the slice of the window that a lease on rg owns.
func (s *Store) ListInstances(ctx context.Context, w window.Window, rg lease.Range) ([]Instance, error) {
	r := s.ring
	out, err := s.scanInstances(ctx, cqlSelectInstancesInRange,
		r.Region, r.Cluster, r.Service, day(w.Day), w.Minute, rg.Start, rg.End)
	if err != nil {
		return nil, fmt.Errorf("cassandra: list instances of %s in %s: %w", w, rg, err)
	}
	return out, nil
}

// ListAllInstances lists the instance markers of a window across every token: Node-0's gate 1
// and tests. limit > 0 stops after that many rows (gate 1 needs one).
func (s *Store) ListAllInstances(ctx context.Context, w window.Window, limit int) ([]Instance, error) {
	r := s.ring
	var out []Instance
	var err error
	if limit > 0 {
		out, err = s.scanInstances(ctx, cqlSelectInstancesLimit, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute, limit)
	} else {
		out, err = s.scanInstances(ctx, cqlSelectInstances, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute)
	}
	if err != nil {
		return nil, fmt.Errorf("cassandra: list instances of %s: %w", w, err)
	}
	return out, nil
}

// HasInstances reports whether any instance marker is left in a window (gate 1).
func (s *Store) HasInstances(ctx context.Context, w window.Window) (bool, error) {
	in, err := s.ListAllInstances(ctx, w, 1)
	return len(in) > 0, err
}

func (s *Store) scanInstances(ctx context.Context, stmt string, args ...any) ([]Instance, error) {
	var out []Instance
	err := s.scan(ctx, stmt, func(sc gocql.Scanner) error {
		var in Instance
		if err := sc.Scan(&in.Token, &in.ID); err != nil {
			return err
		}
		out = append(out, in)
		return nil
	}, args...)
	return out, err
}

// DeleteInstance deletes the tier-3 marker of an instance in a window (the worker that owns its
// token, once every bucket of it is gone) with a tombstone stamped at (see DeleteDay).
func (s *Store) DeleteInstance(ctx context.Context, w window.Window, instanceID string, at time.Time) error {
	r := s.ring
	return s.exec(ctx, cqlDeleteInstance, micros(at), r.Region, r.Cluster, r.Service, day(w.Day), w.Minute,
		Token(instanceID), instanceID)
}

// --- Tier 4 -------------------------------------------------------------------------------

// InsertBucket writes the tier-4 row of a bucket.
func (s *Store) InsertBucket(ctx context.Context, w window.Window, instanceID string, bucket int) error {
	r := s.ring
	return s.exec(ctx, cqlInsertBucket, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute, instanceID, bucket)
}

// ListBuckets lists the bucket indexes of an instance in a window, lowest first.
func (s *Store) ListBuckets(ctx context.Context, w window.Window, instanceID string) ([]int, error) {
	r := s.ring
	var out []int
	err := s.scan(ctx, cqlSelectBuckets, func(sc gocql.Scanner) error {
		var b int
		if err := sc.Scan(&b); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	}, r.Region, r.Cluster, r.Service, day(w.Day), w.Minute, instanceID)
	if err != nil {
		return nil, fmt.Errorf("cassandra: list buckets of %s in %s: %w", instanceID, w, err)
	}
	return out, nil
}

// DeleteBucket deletes the tier-4 row of a bucket, after its tier-5 partition is gone, with a
// tombstone stamped at (see DeleteDay).
func (s *Store) DeleteBucket(ctx context.Context, w window.Window, instanceID string, bucket int, at time.Time) error {
	r := s.ring
	return s.exec(ctx, cqlDeleteBucket, micros(at), r.Region, r.Cluster, r.Service, day(w.Day), w.Minute, instanceID, bucket)
}

// --- Tier 5 -------------------------------------------------------------------------------

func (s *Store) bucketArgs(b BucketKey) []any {
	r := s.ring
	return []any{r.Region, r.Cluster, r.Service, day(b.Window.Day), b.Window.Minute, b.InstanceID, b.Bucket}
}

// InsertTransaction writes one tier-5 row.
func (s *Store) InsertTransaction(ctx context.Context, b BucketKey, t Transaction) error {
	args := append(s.bucketArgs(b), t.ID, t.AddedAt, t.AllocationKey, t.ImplType, t.Attempt, t.Replay)
	return s.exec(ctx, cqlInsertTransaction, args...)
}

// maxBatchRows bounds an unlogged batch; all its rows share one partition, so Cassandra applies
// it as one mutation (and does not apply the batch size warning to it).
const maxBatchRows = 100

// InsertTransactions writes rows into one bucket with unlogged single-partition batches.
func (s *Store) InsertTransactions(ctx context.Context, b BucketKey, ts []Transaction) error {
	text := s.stmts[cqlInsertTransaction]
	for len(ts) > 0 {
		if err := s.check(ctx); err != nil {
			return err
		}
		n := min(len(ts), maxBatchRows)
		batch := s.session.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
		batch.Observer(counter{s.statements})
		batch.WithTimestamp(s.timestamp())
		if s.retry != nil {
			batch.RetryPolicy(s.retry)
		}
		if s.tracer != nil {
			batch.Trace(s.tracer)
		}
		for _, t := range ts[:n] {
			args := append(s.bucketArgs(b), t.ID, t.AddedAt, t.AllocationKey, t.ImplType, t.Attempt, t.Replay)
			batch.Entries = append(batch.Entries, gocql.BatchEntry{Stmt: text, Args: args, Idempotent: true})
		}
		if err := s.session.ExecuteBatch(batch); err != nil {
			return fmt.Errorf("cassandra: insert %d rows into bucket %d of %s in %s: %w", n, b.Bucket, b.InstanceID, b.Window, err)
		}
		ts = ts[n:]
	}
	return nil
}

func scanTransaction(sc gocql.Scanner) (Transaction, error) {
	var t Transaction
	var replay *int // null for a row of a writer that predates the column
	err := sc.Scan(&t.ID, &t.AddedAt, &t.AllocationKey, &t.ImplType, &t.Attempt, &replay)
	if replay != nil {
		t.Replay = *replay
	}
	return t, err
}

// ReadBucketPage reads one page of a bucket: pass a nil pageState for the first page and the
// returned next for the following ones; next is nil after the last page. A worker can keep
// next to resume a bucket without holding all of it in memory.
func (s *Store) ReadBucketPage(ctx context.Context, b BucketKey, pageState []byte) (rows []Transaction, next []byte, err error) {
	if err := s.check(ctx); err != nil {
		return nil, nil, err
	}
	iter := s.query(ctx, cqlSelectTransactions, read, s.bucketArgs(b)...).
		PageSize(s.pageSize).PageState(pageState).Iter() // PageState turns off automatic paging
	next = iter.PageState()
	sc := iter.Scanner()
	for sc.Next() {
		t, err := scanTransaction(sc)
		if err != nil {
			_ = iter.Close()
			return nil, nil, err
		}
		rows = append(rows, t)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("cassandra: read bucket %d of %s in %s: %w", b.Bucket, b.InstanceID, b.Window, err)
	}
	if len(next) == 0 {
		next = nil
	}
	return rows, next, nil
}

// ForEachTransaction streams every row of a bucket, page by page, to fn; it stops at fn's
// first error and returns it.
func (s *Store) ForEachTransaction(ctx context.Context, b BucketKey, fn func(Transaction) error) error {
	var state []byte
	for {
		rows, next, err := s.ReadBucketPage(ctx, b, state)
		if err != nil {
			return err
		}
		for _, t := range rows {
			if err := fn(t); err != nil {
				return err
			}
		}
		if next == nil {
			return nil
		}
		state = next
	}
}

// DeleteBucketPartition deletes a whole tier-5 bucket with one partition tombstone stamped at
// (see DeleteDay): the only way a worker removes failures it is done with.
func (s *Store) DeleteBucketPartition(ctx context.Context, b BucketKey, at time.Time) error {
	return s.exec(ctx, cqlDeleteBucketPartition, append([]any{micros(at)}, s.bucketArgs(b)...)...)
}

// DeleteTransaction deletes one tier-5 row. It leaves a row tombstone that every later read of
// the bucket counts: prefer DeleteBucketPartition; this is for repairs and tests.
func (s *Store) DeleteTransaction(ctx context.Context, b BucketKey, transactionID string) error {
	return s.exec(ctx, cqlDeleteTransaction, append(s.bucketArgs(b), transactionID)...)
}
