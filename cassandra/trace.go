package cassandra

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/gocql/gocql"
)

// ReadStats sums what Cassandra's query traces say the reads of some statements touched.
type ReadStats struct {
	Traces     int // trace sessions collected (one per request: pages count separately)
	LiveRows   int // "Read N live rows ..."
	Tombstones int // "... and M tombstone cells"
}

var readEvent = regexp.MustCompile(`Read (\d+) live rows and (\d+) tombstone cells`)

// TombstoneTracer is a gocql.Tracer that remembers trace ids so that Stats can add up the
// tombstones Cassandra scanned for the traced statements. It is the test-side proof that a scan
// avoids deleted rows: trace a Store with Store.Traced(tt), run the query, read tt.Stats.
// Tracing costs Cassandra extra writes per statement; never use it in production.
type TombstoneTracer struct {
	session *gocql.Session
	mu      sync.Mutex
	ids     [][]byte
}

// NewTombstoneTracer reads traces through session.
func NewTombstoneTracer(session *gocql.Session) *TombstoneTracer {
	return &TombstoneTracer{session: session}
}

// Trace implements gocql.Tracer; it only records the id (gocql calls it inline).
func (t *TombstoneTracer) Trace(traceID []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ids = append(t.ids, append([]byte(nil), traceID...))
}

// Reset forgets the traces collected so far.
func (t *TombstoneTracer) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ids = nil
}

// Stats reads every collected trace and adds up its read events. Cassandra writes traces in
// the background, so Stats polls each trace session until Cassandra has closed it (its duration
// is set); ctx bounds the wait.
func (t *TombstoneTracer) Stats(ctx context.Context) (ReadStats, error) {
	t.mu.Lock()
	ids := append([][]byte(nil), t.ids...)
	t.mu.Unlock()
	var st ReadStats
	for _, id := range ids {
		live, tomb, err := readTrace(ctx, t.session, id)
		if err != nil {
			return st, err
		}
		st.Traces++
		st.LiveRows += live
		st.Tombstones += tomb
	}
	return st, nil
}

// TraceQuery runs one statement with tracing on and returns what its reads touched: for
// checking a query that the Store does not run.
func TraceQuery(ctx context.Context, session *gocql.Session, stmt string, args ...any) (ReadStats, error) {
	tt := NewTombstoneTracer(session)
	iter := session.Query(stmt, args...).WithContext(ctx).Trace(tt).Iter()
	for iter.Scanner().Next() {
	}
	if err := iter.Close(); err != nil {
		return ReadStats{}, err
	}
	return tt.Stats(ctx)
}

func readTrace(ctx context.Context, s *gocql.Session, id []byte) (live, tombstones int, err error) {
	uuid, err := gocql.UUIDFromBytes(id)
	if err != nil {
		return 0, 0, fmt.Errorf("cassandra: trace id: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var duration *int
		err := s.Query(`SELECT duration FROM system_traces.sessions WHERE session_id = ?`, uuid).
			WithContext(ctx).Consistency(gocql.One).Scan(&duration)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return 0, 0, fmt.Errorf("cassandra: read trace session %s: %w", uuid, err)
		}
		if err == nil && duration != nil {
			break
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("cassandra: trace %s not complete: %w", uuid, ctx.Err())
		case <-tick.C:
		}
	}
	iter := s.Query(`SELECT activity FROM system_traces.events WHERE session_id = ?`, uuid).
		WithContext(ctx).Consistency(gocql.One).Iter()
	var activity string
	for iter.Scan(&activity) {
		if m := readEvent.FindStringSubmatch(activity); m != nil {
			l, _ := strconv.Atoi(m[1])
			t, _ := strconv.Atoi(m[2])
			live += l
			tombstones += t
		}
	}
	if err := iter.Close(); err != nil {
		return 0, 0, fmt.Errorf("cassandra: read trace events %s: %w", uuid, err)
	}
	return live, tombstones, nil
}
