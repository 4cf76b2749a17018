package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/cassandratest"
)

// ReadHistogram is one row of Cassandra's system_views.tombstones_per_read: the tombstones
// each local read of a table scanned since the table was created. Cassandra keeps it in
// exponential buckets (about 20% wide), so P50, P99 and Max are bucket bounds, not exact counts.
type ReadHistogram struct {
	Table         string
	Reads         int64
	P50, P99, Max float64
}

// TombstonesPerRead reads the histogram of every table of ks that was read at least once.
func TombstonesPerRead(ctx context.Context, s *gocql.Session, ks string) ([]ReadHistogram, error) {
	iter := s.Query(`SELECT table_name, count, p50th, p99th, max FROM system_views.tombstones_per_read WHERE keyspace_name = ?`, ks).
		WithContext(ctx).Iter()
	var out []ReadHistogram
	var h ReadHistogram
	for iter.Scan(&h.Table, &h.Reads, &h.P50, &h.P99, &h.Max) {
		if h.Reads > 0 {
			out = append(out, h)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read system_views.tombstones_per_read: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out, nil
}

// PrintHistograms writes the histograms as a markdown table.
func PrintHistograms(w io.Writer, hs []ReadHistogram) {
	fmt.Fprintln(w, "| table | reads | tombstones p50 | p99 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, h := range hs {
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f |\n", h.Table, h.Reads, h.P50, h.P99, h.Max)
	}
}

// Log follows one of Cassandra's log files from the moment it was opened: the tombstone log
// (the tombstone_warn_threshold lines of org.apache.cassandra.db.ReadCommand) or the system log,
// where org.apache.cassandra.service.StorageProxy reports a read aborted at
// tombstone_failure_threshold ("Scanned over N tombstones ... query aborted").
type Log struct {
	Path   string
	offset int64
}

// OpenTombstoneLog follows the tombstone log.
func OpenTombstoneLog() *Log { return openLog(cassandratest.TombstoneLogPath()) }

// OpenSystemLog follows the system log.
func OpenSystemLog() *Log { return openLog(cassandratest.LogPath()) }

// openLog remembers the current end of path. A missing file is not an error here: Lines
// reports it.
func openLog(path string) *Log {
	l := &Log{Path: path}
	if fi, err := os.Stat(path); err == nil {
		l.offset = fi.Size()
	}
	return l
}

// Lines returns the lines written since the log was opened that contain every one of words.
func (l *Log) Lines(words ...string) ([]string, error) {
	f, err := os.Open(l.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := l.offset
	if fi.Size() < off {
		off = 0 // rotated or truncated
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	var out []string
next:
	for _, line := range strings.Split(string(b), "\n") {
		for _, w := range words {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// Traced runs fn on a Store that traces every statement and returns what those statements'
// reads scanned, summed.
func Traced(ctx context.Context, s *gocql.Session, st *cassandra.Store, fn func(*cassandra.Store) error) (cassandra.ReadStats, error) {
	tt := cassandra.NewTombstoneTracer(s)
	if err := fn(st.Traced(tt)); err != nil {
		return cassandra.ReadStats{}, err
	}
	return tt.Stats(ctx)
}
