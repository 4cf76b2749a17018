package worker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

// The acceptance history: rounds of windows, each window written by the same instances, every
// row of it recorded late (backdated) and then drained. 10 × 20 × 50 × 10 = 100,000 failures over
// 200 one-minute windows from 21:40 to 01:00 the next day: 140 windows in the first day's tier-2
// partition, so a tier-2 scan that did not start at its checkpoint would read 100+ row
// tombstones, and 50 instance markers per window, the most a window may hold for its tier-3
// row tombstones to stay under the threshold of 100.
const (
	acceptRounds            = 10
	acceptWindowsPerRound   = 20
	acceptInstances         = 50
	acceptRowsPerInstance   = 10
	acceptWorkers           = 2
	acceptWarnThreshold     = 100
	acceptMaxCyclesPerRound = 8
)

var acceptStart = time.Date(2026, time.March, 9, 21, 40, 0, 0, time.UTC)

// acceptExecutor is a no-op executor that counts every transaction it ran.
type acceptExecutor struct {
	runs sync.Map // transaction id -> *atomic.Int32
	n    atomic.Int64
}

func (e *acceptExecutor) Execute(_ context.Context, t worker.Task) worker.Outcome {
	c, _ := e.runs.LoadOrStore(t.TransactionID, new(atomic.Int32))
	c.(*atomic.Int32).Add(1)
	e.n.Add(1)
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

// TestDrainRaisesNoTombstoneWarning is the acceptance test of the directory's delete design:
// with Cassandra warning from 100 scanned tombstones, draining 100,000 failures through 200
// windows (two workers splitting the ring, concurrency 100 each, a no-op executor) makes no read
// of any table of the test's keyspace cross the threshold. Cassandra's own log is the witness:
// it names every read that crossed it, whichever query of the worker or of Node-0 it was. A
// control read of deleted rows at the end proves, in the same run, that a crossing is seen both
// in the log and in the client warnings.
func TestDrainRaisesNoTombstoneWarning(t *testing.T) {
	session := cassandratest.Session(t)
	ctx := context.Background()
	requireWarnThreshold(t, session)
	logPath := cassandratest.TombstoneLogPath()
	logStart, err := fileSize(logPath)
	if err != nil {
		t.Fatalf("tombstone log %s: %v: the test reads Cassandra's warnings there (scripts/cassandra.sh writes it)", logPath, err)
	}

	ks := cassandratest.NewKeyspace(t)
	if err := cassandra.ApplySchema(ctx, session, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	ring := lease.RingKey{Region: "eu-accept", Cluster: "c1", Service: "orders"}
	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1, PageSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(acceptStart)
	// The importer's clock lags the workers' write clock (the wall clock) by the whole bound, so
	// that the rows it writes a moment of wall time before a drain are older than its checked
	// deletes, as every row of a window is in production. Unchecked: its manual clock names past
	// windows on purpose; the skew goes through the write clock.
	rec, err := recorder.New(store.WithWriteClock(clocktest.NewShifted(-worker.DefaultMaxClockOffset)), recorder.Config{InstanceID: "importer", Clock: clock, UncheckedClock: true})
	if err != nil {
		t.Fatal(err)
	}
	exec := &acceptExecutor{}
	scanners := make([]*worker.Scanner, acceptWorkers)
	for i, rg := range lease.Split(acceptWorkers) {
		g := lease.NewGuard(clock, 100*time.Millisecond)
		// One static lease for the whole test: the clock only moves forward by the history's
		// span, far inside it.
		g.Set(lease.Lease{
			WorkerID: "w" + strconv.Itoa(i), Ring: ring, NodeIndex: i, NodeCount: acceptWorkers, Epoch: 1,
			Ranges: lease.Ranges{rg}, TTL: 30 * 24 * time.Hour, ValidFrom: acceptStart,
		})
		sc, err := worker.New(worker.Config{
			Region: ring.Region, Cluster: ring.Cluster, Service: ring.Service, WorkerID: "w" + strconv.Itoa(i),
			WindowMinutes: 1, Concurrency: 100, Clock: clock,
			// Generous for a loaded 2-core machine: the clock is manual, nothing expires.
			QueryTimeout: 10 * time.Second, ExecTimeout: 10 * time.Second,
		}, store, g, exec)
		if err != nil {
			t.Fatal(err)
		}
		scanners[i] = sc
	}

	first, err := window.New(window.DateOf(acceptStart), acceptStart.Hour()*60+acceptStart.Minute(), 1)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for round := 0; round < acceptRounds; round++ {
		ws := make([]window.Window, acceptWindowsPerRound)
		for j := range ws {
			ws[j] = first.Add(round*acceptWindowsPerRound + j)
		}
		last := ws[len(ws)-1]
		// Every window of the round has passed: the recorder writes them late, and Node-0 may
		// delete them once drained.
		clock.Set(last.End().Add(worker.DefaultMaxClockOffset + time.Second))
		for _, w := range ws {
			fs := make([]recorder.Failure, 0, acceptInstances*acceptRowsPerInstance)
			for in := 0; in < acceptInstances; in++ {
				for r := 0; r < acceptRowsPerInstance; r++ {
					fs = append(fs, recorder.Failure{
						TransactionID: fmt.Sprintf("tx-%s-%02d-%02d", w, in, r),
						InstanceID:    fmt.Sprintf("pod-%02d", in),
						ImplType:      "Payment", AllocationKey: "k",
					})
				}
			}
			if err := rec.RecordAt(ctx, w, fs...); err != nil {
				t.Fatalf("record into %s: %v", w, err)
			}
			total += len(fs)
		}
		drainAll(t, scanners, round)
	}

	var sum worker.Stats
	for _, sc := range scanners {
		s := sc.Stats()
		sum.Done += s.Done
		sum.BucketsKept += s.BucketsKept
		sum.InstancesDeleted += s.InstancesDeleted
		sum.WindowsDeleted += s.WindowsDeleted
		sum.DaysDeleted += s.DaysDeleted
	}
	t.Logf("drained %d failures: %d executions, %d done, %d buckets kept, %d instance markers, %d windows, %d days deleted",
		total, exec.n.Load(), sum.Done, sum.BucketsKept, sum.InstancesDeleted, sum.WindowsDeleted, sum.DaysDeleted)
	if got := exec.n.Load(); got != int64(total) {
		t.Errorf("%d executions, want %d (each failure once)", got, total)
	}
	exec.runs.Range(func(id, n any) bool {
		if c := n.(*atomic.Int32).Load(); c != 1 {
			t.Errorf("%s ran %d times", id, c)
		}
		return true
	})
	windows := acceptRounds * acceptWindowsPerRound
	if sum.InstancesDeleted != uint64(windows*acceptInstances) || sum.WindowsDeleted != uint64(windows) || sum.DaysDeleted < 1 {
		t.Errorf("deleted %d instance markers, %d windows, %d days; want %d, %d, at least 1",
			sum.InstancesDeleted, sum.WindowsDeleted, sum.DaysDeleted, windows*acceptInstances, windows)
	}

	// The control: 150 row deletes then a read of their partition must show up in both places,
	// which proves the log and the threshold in use now would have caught a crossing above.
	control := readDeletedRows(t, session, ks, acceptWarnThreshold+50)
	lines := waitForLogLine(t, logPath, logStart, ks+"."+control)
	var crossings []string
	for _, l := range lines {
		if strings.Contains(l, ks+".") && !strings.Contains(l, ks+"."+control) {
			crossings = append(crossings, l)
		}
	}
	if len(crossings) > 0 {
		t.Errorf("%d reads of the retry directory crossed tombstone_warn_threshold; first:\n%s", len(crossings), crossings[0])
	}
}

// drainAll runs a cycle of every worker at once, again and again, until none makes progress.
func drainAll(t *testing.T, scanners []*worker.Scanner, round int) {
	t.Helper()
	for cycle := 0; cycle < acceptMaxCyclesPerRound; cycle++ {
		var wg sync.WaitGroup
		progress := make([]bool, len(scanners))
		errs := make([]error, len(scanners))
		for i, sc := range scanners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := sc.Cycle(context.Background())
				progress[i], errs[i] = res.Progress(), err
			}()
		}
		wg.Wait()
		moved := false
		for i := range scanners {
			if errs[i] != nil {
				t.Fatalf("round %d, cycle %d, worker %d: %v", round, cycle, i, errs[i])
			}
			moved = moved || progress[i]
		}
		if !moved {
			return
		}
	}
	t.Fatalf("round %d still made progress after %d cycles", round, acceptMaxCyclesPerRound)
}

// requireWarnThreshold fails the test unless the Cassandra it runs against warns from at most
// acceptWarnThreshold tombstones: with Cassandra's default of 1,000 the test would prove little.
func requireWarnThreshold(t *testing.T, s *gocql.Session) {
	t.Helper()
	var v string
	if err := s.Query(`SELECT value FROM system_views.settings WHERE name = 'tombstone_warn_threshold'`).Scan(&v); err != nil {
		t.Fatalf("read tombstone_warn_threshold: %v", err)
	}
	if n, err := strconv.Atoi(v); err != nil || n > acceptWarnThreshold {
		t.Fatalf("tombstone_warn_threshold is %q; this test needs %d or less: restart Cassandra with "+
			"CASSANDRA_TOMBSTONE_WARN=%d (make cassandra-stop; make cassandra-start)", v, acceptWarnThreshold, acceptWarnThreshold)
	}
}

// readDeletedRows writes n rows into one partition of a table of its own, deletes them row by
// row (the pattern the directory avoids), reads the partition, and checks that the client got
// the threshold warning. It returns the table's name.
func readDeletedRows(t *testing.T, s *gocql.Session, ks string, n int) string {
	t.Helper()
	const table = "zz_control_row_deletes"
	if err := s.Query("CREATE TABLE " + ks + "." + table + " (p int, c int, PRIMARY KEY (p, c))").Exec(); err != nil {
		t.Fatal(err)
	}
	for c := 0; c < n; c++ {
		if err := s.Query("INSERT INTO "+ks+"."+table+" (p, c) VALUES (0, ?)", c).Exec(); err != nil {
			t.Fatal(err)
		}
		if err := s.Query("DELETE FROM "+ks+"."+table+" WHERE p = 0 AND c = ?", c).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	iter := s.Query("SELECT c FROM " + ks + "." + table + " WHERE p = 0").Iter()
	warnings := iter.Warnings() // gocql drops them on Close
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	if len(warnings) == 0 || !strings.Contains(strings.Join(warnings, " "), "tombstone") {
		t.Fatalf("control read of %d deleted rows got client warnings %q; want the tombstone warning", n, warnings)
	}
	return table
}

// waitForLogLine waits until a line containing want appears in the log after offset, and
// returns every line written there after offset. Cassandra logs reads in order, so once the
// control read's line is there, the lines of every earlier read are too.
func waitForLogLine(t *testing.T, path string, offset int64, want string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines, err := readLinesFrom(path, offset)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		for _, l := range lines {
			if strings.Contains(l, want) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line naming %s in %s after 30 s: the log does not show tombstone warnings", want, path)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// readLinesFrom reads the lines of path after offset (the whole file if it was truncated or
// rotated since).
func readLinesFrom(path string, offset int64) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < offset {
		offset = 0
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(b), "\n"), nil
}
