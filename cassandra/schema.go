package cassandra

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gocql/gocql"
)

// Replication is the keyspace's replication: SimpleStrategy with a factor, or
// NetworkTopologyStrategy with a factor per datacenter (what a multi-region deployment uses,
// so that LOCAL_QUORUM stays inside one region).
type Replication struct {
	// DataCenters selects NetworkTopologyStrategy when it is not empty: datacenter -> factor.
	DataCenters map[string]int
	// Factor is the SimpleStrategy replication factor; zero means 1.
	Factor int
}

// ParseReplication reads the flag form of a replication: "3" (SimpleStrategy, factor 3), ""
// (SimpleStrategy, factor 1) or "dc1=3,dc2=3" (NetworkTopologyStrategy).
func ParseReplication(s string) (Replication, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Replication{Factor: 1}, nil
	}
	if !strings.Contains(s, "=") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return Replication{}, fmt.Errorf("%w: %q", ErrReplication, s)
		}
		return Replication{Factor: n}, nil
	}
	r := Replication{DataCenters: map[string]int{}}
	for _, part := range strings.Split(s, ",") {
		dc, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.Atoi(strings.TrimSpace(n))
		dc = strings.TrimSpace(dc)
		if !ok || err != nil || f < 1 || dc == "" {
			return Replication{}, fmt.Errorf("%w: %q", ErrReplication, s)
		}
		r.DataCenters[dc] = f
	}
	return r, r.Validate()
}

// Validate refuses factors below one and datacenter names that cannot be quoted in CQL.
func (r Replication) Validate() error {
	if len(r.DataCenters) == 0 {
		if r.Factor < 0 {
			return fmt.Errorf("%w: factor %d", ErrReplication, r.Factor)
		}
		return nil
	}
	for dc, f := range r.DataCenters {
		if f < 1 || dc == "" || strings.ContainsAny(dc, `'\`) {
			return fmt.Errorf("%w: %q=%d", ErrReplication, dc, f)
		}
	}
	return nil
}

// CQL is the replication map as a CQL literal.
func (r Replication) CQL() string {
	if len(r.DataCenters) == 0 {
		f := r.Factor
		if f == 0 {
			f = 1
		}
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", f)
	}
	dcs := make([]string, 0, len(r.DataCenters))
	for dc := range r.DataCenters {
		dcs = append(dcs, dc)
	}
	sort.Strings(dcs) // stable output for `retryring schema print`
	var b strings.Builder
	b.WriteString("{'class': 'NetworkTopologyStrategy'")
	for _, dc := range dcs {
		fmt.Fprintf(&b, ", '%s': %d", dc, r.DataCenters[dc])
	}
	b.WriteString("}")
	return b.String()
}

var keyspaceRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,47}$`)

// ValidateKeyspace accepts the unquoted keyspace names Cassandra allows: a letter, then up to
// 47 letters, digits or underscores.
func ValidateKeyspace(ks string) error {
	if !keyspaceRE.MatchString(ks) {
		return fmt.Errorf("%w: %q", ErrKeyspace, ks)
	}
	return nil
}

// Why these table options (the architecture guide's Q8, adapted):
//
//   - Size-tiered compaction everywhere. The directory tiers hold a few bytes per row, and tier 5
//     is written in bursts (an outage) and removed a partition at a time, so the cheap write
//     amplification of STCS matters more than LCS's read locality: every read here names its
//     partition and finds it in few SSTables anyway.
//   - gc_grace_seconds 86400 (one day, not ten) on the five tiers, so that the tombstones our
//     deletes leave are purged soon. That is safe because a resurrected row is harmless here: a
//     directory row that comes back names an empty window, instance or bucket, which the next
//     pass deletes again; a tier-5 row that comes back is either invisible (its directory is gone)
//     or skipped by its COMMITTED marker, which is kept 7 days, longer than one day. A day is also
//     far more than Cassandra's 3 h hint window, and clusters of more than one node must run
//     repair at least daily (docs/schema.md).
//   - Markers are only ever written with a TTL and never deleted, so their tombstones are
//     expirations that every replica computes alike: 3 h (the hint window) is grace enough.
//   - Checkpoint rows expire after 400 days: an expired checkpoint only makes a scan start at the
//     beginning again, which is always correct.
const (
	optsDirectory   = `compaction = {'class': 'SizeTieredCompactionStrategy'} AND gc_grace_seconds = 86400`
	optsMarkers     = `compaction = {'class': 'SizeTieredCompactionStrategy'} AND gc_grace_seconds = 10800`
	optsCheckpoints = `compaction = {'class': 'SizeTieredCompactionStrategy'} AND gc_grace_seconds = 86400 AND default_time_to_live = 34560000`
	optsDeadLetters = `compaction = {'class': 'SizeTieredCompactionStrategy'}`
)

// Tables lists the tables of the schema, in creation order.
var Tables = []string{
	"es_days_by_year",
	"es_retry_windows_by_day",
	"es_instances_by_retry_window",
	"es_buckets_by_instance",
	"es_retry_transactions_by_instance",
	"es_execution_markers",
	"es_dead_letters",
	"es_dead_letter_replays",
	"es_window_checkpoints",
	"es_day_checkpoints",
}

// Schema is the CQL that creates the keyspace and every table, one statement per element, each
// idempotent (IF NOT EXISTS): `retryring schema print` prints it and ApplySchema runs it.
func Schema(keyspace string, r Replication) ([]string, error) {
	if err := ValidateKeyspace(keyspace); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	stmts := []string{
		fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s AND durable_writes = true", keyspace, r.CQL()),
	}
	for _, t := range tableDDL {
		stmts = append(stmts, inKeyspace(t, keyspace))
	}
	return stmts, nil
}

// ApplySchema creates the keyspace and the tables that do not exist yet, and adds to existing
// tables the columns a later release introduced (addedColumns). It changes no table option:
// changing a live table's options is an operator's decision. It first refuses, with
// ErrReplicationUnmet, a replication the cluster has too few nodes for (CheckReplication).
func ApplySchema(ctx context.Context, s *gocql.Session, keyspace string, r Replication) error {
	stmts, err := Schema(keyspace, r)
	if err != nil {
		return err
	}
	dcs, err := ReadDatacenters(ctx, s)
	if err != nil {
		return fmt.Errorf("cassandra: apply schema: %w", err)
	}
	if err := CheckReplication(r, dcs); err != nil {
		return err
	}
	for _, stmt := range stmts {
		// DDL is not retried automatically: a timed-out CREATE may still be applied, and
		// IF NOT EXISTS makes running the whole list again the way to recover.
		if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("cassandra: apply schema: %s: %w", firstLine(stmt), err)
		}
	}
	return addMissingColumns(ctx, s, keyspace)
}

// addedColumns are the columns added to a table after its first release, in the order they
// came. A keyspace created before them gets them from ApplySchema; CREATE TABLE above already
// has them. Only ever append: a column is never renamed or dropped.
var addedColumns = []struct{ table, column, cqlType string }{
	// Invariant 9 (backoff holds): the replay generation of a row and the marker's floor.
	{"es_retry_transactions_by_instance", "replay", "int"},
	{"es_execution_markers", "floor_replay", "int"},
	{"es_execution_markers", "floor_attempt", "int"},
	// Dead-letter replay: the generation given up on, and the replay that took it.
	{"es_dead_letters", "replay", "int"},
	{"es_dead_letters", "replayed_by", "text"},
	{"es_dead_letters", "replayed_at", "timestamp"},
	// Invariants 7 and 9 (issue 16): each marker state in cells of its own, so that a late
	// IN_PROGRESS or a duplicate copy's DEAD_LETTERED cannot shadow a COMMITTED.
	{"es_execution_markers", "committed_by", "text"},
	{"es_execution_markers", "committed_at", "timestamp"},
	{"es_execution_markers", "dead_lettered_by", "text"},
	{"es_execution_markers", "dead_lettered_at", "timestamp"},
	{"es_execution_markers", "in_progress_by", "text"},
	{"es_execution_markers", "in_progress_at", "timestamp"},
	// Review finding 5: the dead_at of the dead letter a replay mark was written for, so that a
	// mark that outlives its row (stamped later than the step's next dead letter) marks nothing.
	{"es_dead_letters", "replayed_dead_at", "timestamp"},
}

// CheckSchema reports ErrSchemaOutdated, naming what is missing, when the keyspace lacks a
// table or an added column: a worker of this release started on an older keyspace would fail
// every query that names it, so it refuses to start instead.
func CheckSchema(ctx context.Context, s *gocql.Session, keyspace string) error {
	var missing []string
	for _, t := range Tables {
		ok, err := hasColumn(ctx, s, keyspace, t, "")
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, "table "+t)
		}
	}
	for _, c := range addedColumns {
		ok, err := hasColumn(ctx, s, keyspace, c.table, c.column)
		if err != nil {
			return err
		}
		if !ok && !slices.Contains(missing, "table "+c.table) {
			missing = append(missing, "column "+c.table+"."+c.column)
		}
	}
	switch {
	case len(missing) == len(Tables):
		return fmt.Errorf("%w: keyspace %s holds none of the retry directory's tables (does it exist? `retryring schema apply --keyspace %s` creates them)", ErrSchemaOutdated, keyspace, keyspace)
	case len(missing) > 0:
		return fmt.Errorf("%w: keyspace %s lacks %s", ErrSchemaOutdated, keyspace, strings.Join(missing, ", "))
	}
	return nil
}

// hasColumn reports whether the table has the column (any column, for "") in system_schema.
func hasColumn(ctx context.Context, s *gocql.Session, keyspace, table, column string) (bool, error) {
	stmt, args := `SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`, []any{keyspace, table}
	if column != "" {
		stmt, args = stmt+` AND column_name = ?`, append(args, column)
	}
	var name string
	err := s.Query(stmt+` LIMIT 1`, args...).WithContext(ctx).Scan(&name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, gocql.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("cassandra: read the schema of %s.%s: %w", keyspace, table, err)
	}
}

// addMissingColumns runs ALTER TABLE ... ADD for every added column the keyspace lacks.
// Cassandra has no ADD IF NOT EXISTS before 5.0's own syntax, so it asks system_schema first;
// running it twice, or on two hosts at once, only ever meets "already exists", which counts
// as done.
func addMissingColumns(ctx context.Context, s *gocql.Session, keyspace string) error {
	for _, c := range addedColumns {
		ok, err := hasColumn(ctx, s, keyspace, c.table, c.column)
		if err != nil {
			return fmt.Errorf("cassandra: apply schema: %w", err)
		}
		if ok {
			continue
		}
		stmt := fmt.Sprintf("ALTER TABLE %s.%s ADD %s %s", keyspace, c.table, c.column, c.cqlType)
		if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil && !strings.Contains(err.Error(), "already exist") {
			return fmt.Errorf("cassandra: apply schema: %s: %w", stmt, err)
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

var tableDDL = []string{
	`CREATE TABLE IF NOT EXISTS KS.es_days_by_year (
    region       text,
    cluster      text,
    service_name text,
    year         int,
    date_of_year date,
    PRIMARY KEY ((region, cluster, service_name, year), date_of_year)
) WITH CLUSTERING ORDER BY (date_of_year ASC)
  AND ` + optsDirectory + `
  AND comment = 'Tier 1: days that may hold retry work, oldest first. Deleted row by row by Node-0 only.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_retry_windows_by_day (
    region        text,
    cluster       text,
    service_name  text,
    date_of_year  date,
    minute_of_day int,
    PRIMARY KEY ((region, cluster, service_name, date_of_year), minute_of_day)
) WITH CLUSTERING ORDER BY (minute_of_day ASC)
  AND ` + optsDirectory + `
  AND comment = 'Tier 2: windows of a day that may hold retry work, named by their first minute. Deleted by Node-0 only; scans start at es_window_checkpoints.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_instances_by_retry_window (
    region            text,
    cluster           text,
    service_name      text,
    date_of_year      date,
    minute_of_day     int,
    instance_id_token bigint,
    instance_id       text,
    PRIMARY KEY ((region, cluster, service_name, date_of_year, minute_of_day), instance_id_token, instance_id)
) WITH CLUSTERING ORDER BY (instance_id_token ASC, instance_id ASC)
  AND ` + optsDirectory + `
  AND comment = 'Tier 3: instance markers of a window; instance_id_token = Murmur3 token(instance_id), so a worker reads its leased token range as one slice.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_buckets_by_instance (
    region        text,
    cluster       text,
    service_name  text,
    date_of_year  date,
    minute_of_day int,
    instance_id   text,
    bucket_index  int,
    PRIMARY KEY ((region, cluster, service_name, date_of_year, minute_of_day, instance_id), bucket_index)
) WITH CLUSTERING ORDER BY (bucket_index ASC)
  AND ` + optsDirectory + `
  AND comment = 'Tier 4: buckets an instance wrote into in a window.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_retry_transactions_by_instance (
    region              text,
    cluster             text,
    service_name        text,
    date_of_year        date,
    minute_of_day       int,
    instance_id         text,
    bucket_index        int,
    transaction_id      text,
    added_datetime      timestamp,
    allocation_key      text,
    stacksaga_impl_type text,
    attempt             int,
    replay              int,
    PRIMARY KEY ((region, cluster, service_name, date_of_year, minute_of_day, instance_id, bucket_index), transaction_id)
) WITH CLUSTERING ORDER BY (transaction_id ASC)
  AND ` + optsDirectory + `
  AND comment = 'Tier 5: failure metadata (never payloads), one bounded partition per bucket, removed by one partition delete.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_execution_markers (
    service_name     text,
    transaction_id   text,
    span_key         text,
    execution_state  text,
    lease_owner      text,
    updated_at       timestamp,
    floor_replay     int,
    floor_attempt    int,
    committed_by     text,
    committed_at     timestamp,
    dead_lettered_by text,
    dead_lettered_at timestamp,
    in_progress_by   text,
    in_progress_at   timestamp,
    PRIMARY KEY ((service_name, transaction_id), span_key)
) WITH CLUSTERING ORDER BY (span_key ASC)
  AND ` + optsMarkers + `
  AND comment = 'STRICT markers, each state in cells of its own, read in the order COMMITTED, floor, DEAD_LETTERED, IN_PROGRESS: committed_* and dead_lettered_* (TTL = retention, default 7 days), in_progress_* (TTL = execution timeout + margin), floor_* = the newest copy of the step (TTL = retention, write timestamp = the copy order). execution_state, lease_owner, updated_at: every state as releases before the per-state cells wrote it, read only.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_dead_letters (
    region              text,
    cluster             text,
    service_name        text,
    dead_day            date,
    transaction_id      text,
    instance_id         text,
    date_of_year        date,
    minute_of_day       int,
    bucket_index        int,
    added_datetime      timestamp,
    allocation_key      text,
    stacksaga_impl_type text,
    attempt             int,
    last_status         int,
    last_error          text,
    dead_at             timestamp,
    worker_id           text,
    replay              int,
    replayed_by         text,
    replayed_at         timestamp,
    replayed_dead_at    timestamp,
    PRIMARY KEY ((region, cluster, service_name, dead_day), transaction_id, stacksaga_impl_type)
) WITH CLUSTERING ORDER BY (transaction_id ASC, stacksaga_impl_type ASC)
  AND ` + optsDeadLetters + `
  AND comment = 'Failures given up on (permanent, or out of attempts), by the UTC day they were given up on. Kept until an operator acts.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_dead_letter_replays (
    region       text,
    cluster      text,
    service_name text,
    replay_id    text,
    started_at   timestamp,
    PRIMARY KEY ((region, cluster, service_name, replay_id))
) WITH ` + optsDeadLetters + `
  AND comment = 'Dead-letter replay runs by --id: a run replays only dead letters given up on before its first start, so running it again replays nothing new.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_window_checkpoints (
    region            text,
    cluster           text,
    service_name      text,
    date_of_year      date,
    first_live_minute int,
    version           bigint,
    PRIMARY KEY ((region, cluster, service_name, date_of_year))
) WITH ` + optsCheckpoints + `
  AND comment = 'No tier-2 row of the day is below first_live_minute: scans of es_retry_windows_by_day start there and never read the row tombstones Node-0 left below it. Changed by LWT only.'`,

	`CREATE TABLE IF NOT EXISTS KS.es_day_checkpoints (
    region          text,
    cluster         text,
    service_name    text,
    year            int,
    first_live_date date,
    version         bigint,
    PRIMARY KEY ((region, cluster, service_name, year))
) WITH ` + optsCheckpoints + `
  AND comment = 'No tier-1 row of the year is below first_live_date: scans of es_days_by_year start there. Changed by LWT only.'`,
}
