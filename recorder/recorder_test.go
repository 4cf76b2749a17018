package recorder_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newRecorder(t *testing.T, st *cassandra.Store, clock *clocktest.Manual, mod func(*recorder.Config)) *recorder.Recorder {
	t.Helper()
	// Unchecked: the manual clock names the windows and is years off Cassandra's on purpose; a
	// check would judge it untrusted. clock_test.go tests the check.
	cfg := recorder.Config{InstanceID: "order-service-pod-1", Clock: clock, UncheckedClock: true}
	if mod != nil {
		mod(&cfg)
	}
	r, err := recorder.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll walks the directory from tier 1 down, as a worker would, and returns every tier-5
// row found per bucket.
func readAll(t *testing.T, ctx context.Context, st *cassandra.Store, years ...int) map[cassandra.BucketKey][]cassandra.Transaction {
	t.Helper()
	out := map[cassandra.BucketKey][]cassandra.Transaction{}
	for _, y := range years {
		days, _, err := st.ListLiveDays(ctx, y)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			ws, _, err := st.ListLiveWindows(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				ins, err := st.ListAllInstances(ctx, w, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range ins {
					if in.Token != cassandra.Token(in.ID) {
						t.Fatalf("instance %s has token %d, want %d", in.ID, in.Token, cassandra.Token(in.ID))
					}
					bs, err := st.ListBuckets(ctx, w, in.ID)
					if err != nil {
						t.Fatal(err)
					}
					for _, b := range bs {
						k := cassandra.BucketKey{Window: w, InstanceID: in.ID, Bucket: b}
						if err := st.ForEachTransaction(ctx, k, func(tx cassandra.Transaction) error {
							out[k] = append(out[k], tx)
							return nil
						}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}
	return out
}

func TestNewValidates(t *testing.T) {
	st := storetest.Store(t, 1)
	cases := map[string]recorder.Config{
		"empty instance":    {},
		"invalid utf-8":     {InstanceID: "\xff"},
		"other service":     {InstanceID: "a", Service: "other"},
		"other length":      {InstanceID: "a", WindowMinutes: 5, UncheckedClock: true},
		"negative bucket":   {InstanceID: "a", BucketSize: -1, UncheckedClock: true},
		"negative backdate": {InstanceID: "a", Backdate: -time.Second, UncheckedClock: true},
	}
	for name, cfg := range cases {
		if _, err := recorder.New(st, cfg); !errors.Is(err, recorder.ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
}

func TestRecordAcrossMidnightAndNewYear(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	clock := clocktest.New(time.Date(2025, 12, 31, 23, 59, 30, 0, time.UTC))
	rec := newRecorder(t, st, clock, nil)

	added := time.Date(2025, 12, 31, 23, 59, 29, 500e6, time.UTC)
	key, err := rec.Record(ctx, recorder.Failure{TransactionID: "tx-1", AllocationKey: "alloc-1", ImplType: "Payment", AddedAt: added})
	if err != nil {
		t.Fatal(err)
	}
	jan1 := window.Date{Year: 2026, Month: time.January, Day: 1}
	want := cassandra.BucketKey{Window: window.Window{Day: jan1, Minute: 0, Length: 1}, InstanceID: "order-service-pod-1", Bucket: 0}
	if key != want {
		t.Fatalf("Record at 23:59:30 on Dec 31 landed in %+v, want %+v", key, want)
	}

	clock.Set(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC))
	if _, err := rec.Record(ctx, recorder.Failure{TransactionID: "tx-2", Attempt: 2}); err != nil {
		t.Fatal(err)
	}

	// Nothing was written under 2025.
	if days, err := st.ListDays(ctx, 2025, window.FirstOfYear(2025)); err != nil || len(days) != 0 {
		t.Fatalf("days of 2025 = %v, %v", days, err)
	}
	if days, _ := st.ListDays(ctx, 2026, window.FirstOfYear(2026)); !slices.Equal(days, []window.Date{jan1}) {
		t.Fatalf("days of 2026 = %v", days)
	}
	ws, _ := st.ListWindows(ctx, jan1, 0)
	if len(ws) != 2 || ws[0].Minute != 0 || ws[1].Minute != 1 {
		t.Fatalf("windows of Jan 1 = %v, want minutes 0 and 1", ws)
	}
	all := readAll(t, ctx, st, 2025, 2026)
	if len(all) != 2 {
		t.Fatalf("found %d buckets, want 2: %v", len(all), all)
	}
	rows := all[want]
	if len(rows) != 1 {
		t.Fatalf("bucket %+v holds %v", want, rows)
	}
	got := rows[0]
	if got.ID != "tx-1" || got.AllocationKey != "alloc-1" || got.ImplType != "Payment" || got.Attempt != 0 || !got.AddedAt.Equal(added) {
		t.Fatalf("tier 5 row = %+v", got)
	}
	second := all[cassandra.BucketKey{Window: window.Window{Day: jan1, Minute: 1, Length: 1}, InstanceID: "order-service-pod-1"}]
	if len(second) != 1 || second[0].Attempt != 2 || !second[0].AddedAt.Equal(clock.Now()) {
		t.Fatalf("second failure = %+v", second)
	}

	// Five-minute windows: 23:57 is in the last window of the day, so W+1 is 00:00 next year.
	st5 := storetest.Store(t, 5)
	rec5 := newRecorder(t, st5, clocktest.New(time.Date(2026, 12, 31, 23, 57, 0, 0, time.UTC)), nil)
	k5, err := rec5.Record(ctx, recorder.Failure{TransactionID: "tx-5"})
	if err != nil {
		t.Fatal(err)
	}
	if k5.Window != (window.Window{Day: window.Date{Year: 2027, Month: time.January, Day: 1}, Minute: 0, Length: 5}) {
		t.Fatalf("5-minute W+1 at 23:57 = %s", k5.Window)
	}
}

func TestRecordNeverWritesIntoAnEnteredWindow(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	// 50 ms before W+1 starts is less than the write budget: the write goes to W+2.
	clock := clocktest.New(time.Date(2028, 2, 28, 23, 59, 59, 950e6, time.UTC))
	rec := newRecorder(t, st, clock, nil)
	k, err := rec.Record(ctx, recorder.Failure{TransactionID: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (window.Window{Day: window.Date{Year: 2028, Month: time.February, Day: 29}, Minute: 1, Length: 1}); k.Window != want {
		t.Fatalf("landed in %s, want %s", k.Window, want)
	}
}

func TestDirectoryRowsWrittenOncePerKey(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	clock := clocktest.New(time.Date(2026, 6, 1, 10, 15, 5, 0, time.UTC))
	rec := newRecorder(t, st, clock, func(c *recorder.Config) { c.BucketSize = 40 })

	record := func(n int, prefix string) {
		for i := range n {
			if _, err := rec.Record(ctx, recorder.Failure{TransactionID: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(100, "a") // tier 1, 2, 3 once; tier 4 for buckets 0, 1, 2; tier 5 100 times
	if s := rec.Stats(); s.Statements != 3+3+100 || s.Failures != 100 {
		t.Fatalf("first window: %+v, want 106 statements for 100 failures", s)
	}
	clock.Set(clock.Now().Add(time.Minute)) // same day, next window: tier 1 is cached
	record(10, "b")
	if s := rec.Stats(); s.Statements != 106+3+10 {
		t.Fatalf("second window: %d statements, want %d", s.Statements, 106+3+10)
	}
	clock.Set(time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)) // next day: every tier again
	record(1, "c")
	if s := rec.Stats(); s.Statements != 119+5 {
		t.Fatalf("next day: %d statements, want %d", s.Statements, 119+5)
	}
	// Windows that started are forgotten: the cache follows the live windows only.
	if s := rec.Stats(); s.CachedRows != 4 {
		t.Fatalf("cache holds %d rows, want the 4 of the live window", s.CachedRows)
	}
}

func TestFailedDirectoryWriteIsRetried(t *testing.T) {
	st := storetest.Store(t, 1)
	clock := clocktest.New(time.Date(2026, 6, 1, 10, 15, 5, 0, time.UTC))
	rec := newRecorder(t, st, clock, nil)
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rec.Record(dead, recorder.Failure{TransactionID: "lost"}); err == nil {
		t.Fatal("Record with a cancelled context succeeded")
	}
	if s := rec.Stats(); s.Errors != 1 || s.Failures != 0 {
		t.Fatalf("stats after a failed Record: %+v", s)
	}
	ctx := ctxT(t)
	before := rec.Stats().Statements
	if _, err := rec.Record(ctx, recorder.Failure{TransactionID: "kept"}); err != nil {
		t.Fatal(err)
	}
	if n := rec.Stats().Statements - before; n != 5 {
		t.Fatalf("Record after a failed one sent %d statements, want 5 (the directory again, then the row)", n)
	}
	all := readAll(t, ctx, st, 2026)
	if len(all) != 1 {
		t.Fatalf("buckets: %v", all)
	}
	for _, rows := range all {
		if len(rows) != 1 || rows[0].ID != "kept" {
			t.Fatalf("rows: %v", rows)
		}
	}
}

func TestConcurrentRecordsLoseNothing(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	clock := clocktest.New(time.Date(2026, 7, 1, 8, 0, 1, 0, time.UTC))
	const goroutines, each, bucketSize = 50, 20, 7
	rec := newRecorder(t, st, clock, func(c *recorder.Config) { c.BucketSize = bucketSize })

	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := rec.Record(ctx, recorder.Failure{TransactionID: fmt.Sprintf("g%02d-%02d", g, i)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := goroutines * each
	buckets := (total + bucketSize - 1) / bucketSize
	all := readAll(t, ctx, st, 2026)
	if len(all) != buckets {
		t.Fatalf("%d buckets, want %d", len(all), buckets)
	}
	seen := map[string]bool{}
	var idx []int
	for k, rows := range all {
		idx = append(idx, k.Bucket)
		want := bucketSize
		if k.Bucket == buckets-1 {
			want = total - (buckets-1)*bucketSize
		}
		if len(rows) != want {
			t.Errorf("bucket %d holds %d rows, want %d", k.Bucket, len(rows), want)
		}
		for _, r := range rows {
			if seen[r.ID] {
				t.Fatalf("%s recorded twice", r.ID)
			}
			seen[r.ID] = true
		}
	}
	if len(seen) != total {
		t.Fatalf("found %d failures, recorded %d", len(seen), total)
	}
	sort.Ints(idx)
	for i, b := range idx {
		if b != i {
			t.Fatalf("bucket indexes %v are not 0..%d", idx, buckets-1)
		}
	}
	// Each directory row exactly once, however many goroutines raced for it.
	if s := rec.Stats(); s.Statements != uint64(3+buckets+total) {
		t.Fatalf("%d statements, want %d (3 + %d buckets + %d rows)", s.Statements, 3+buckets+total, buckets, total)
	}
}

func TestRecordAtLaterWindowUnderAnotherInstance(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	now := time.Date(2026, 8, 1, 12, 0, 30, 0, time.UTC)
	rec := newRecorder(t, st, clocktest.New(now), func(c *recorder.Config) { c.InstanceID = "worker-1" })
	target, err := window.Ahead(now, 1, 8*time.Minute) // L × 2^3
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.RecordAt(ctx, target, recorder.Failure{TransactionID: "tx-r", Attempt: 3, InstanceID: "order-pod-7", ImplType: "Ship"}); err != nil {
		t.Fatal(err)
	}
	all := readAll(t, ctx, st, 2026)
	k := cassandra.BucketKey{Window: target, InstanceID: "order-pod-7", Bucket: 0}
	if rows := all[k]; len(rows) != 1 || rows[0].Attempt != 3 || rows[0].ImplType != "Ship" {
		t.Fatalf("re-recorded failure: %v (all: %v)", rows, all)
	}
	if err := rec.RecordAt(ctx, window.Window{Day: target.Day, Minute: 3, Length: 5}, recorder.Failure{TransactionID: "x"}); !errors.Is(err, recorder.ErrWindow) {
		t.Fatalf("window of another length: %v", err)
	}
	if _, err := rec.Record(ctx, recorder.Failure{}); !errors.Is(err, recorder.ErrFailure) {
		t.Fatalf("empty transaction id: %v", err)
	}
}

// A backdated (late) write lands in a window whose time has come, possibly after Node-0 moved
// the scan checkpoints past it: the late protocol lowers them so a traversal finds it.
func TestBackdatedWritesAreFoundBehindCheckpoints(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	now := time.Date(2026, 9, 22, 10, 16, 0, 0, time.UTC)
	past := window.Date{Year: 2026, Month: time.September, Day: 19}

	// Node-0 has already cleaned up to September 20 and, on the 19th, to minute 1000.
	dcp, _ := st.DayCheckpoint(ctx, 2026)
	if ok, err := st.SetDayCheckpoint(ctx, 2026, dcp, window.Date{Year: 2026, Month: time.September, Day: 20}); err != nil || !ok {
		t.Fatalf("day checkpoint: %v %v", ok, err)
	}
	wcp, _ := st.WindowCheckpoint(ctx, past)
	if ok, err := st.SetWindowCheckpoint(ctx, past, wcp, 1000); err != nil || !ok {
		t.Fatalf("window checkpoint: %v %v", ok, err)
	}

	backdate := now.Sub(time.Date(2026, 9, 19, 10, 15, 30, 0, time.UTC)) // W+1 of then: 10:16 on the 19th
	rec := newRecorder(t, st, clocktest.New(now), func(c *recorder.Config) { c.Backdate = backdate })
	k, err := rec.Record(ctx, recorder.Failure{TransactionID: "old-1"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Window != (window.Window{Day: past, Minute: 616, Length: 1}) || k.Bucket < 1<<24 {
		t.Fatalf("late write landed in %+v; want window %s/616 and a fresh bucket", k, past)
	}
	// A batch through RecordAt into the same window goes to another fresh bucket.
	var batch []recorder.Failure
	for i := range 30 {
		batch = append(batch, recorder.Failure{TransactionID: fmt.Sprintf("old-b%d", i)})
	}
	if err := rec.RecordAt(ctx, k.Window, batch...); err != nil {
		t.Fatal(err)
	}

	all := readAll(t, ctx, st, 2026)
	n := 0
	for key, rows := range all {
		if key.Window != k.Window {
			t.Fatalf("unexpected bucket %+v", key)
		}
		n += len(rows)
	}
	if len(all) != 2 || n != 31 {
		t.Fatalf("traversal found %d rows in %d buckets, want 31 in 2", n, len(all))
	}
	if cp, _ := st.WindowCheckpoint(ctx, past); cp.Minute != 616 {
		t.Fatalf("window checkpoint %d, want lowered to 616", cp.Minute)
	}

	tooOld := newRecorder(t, st, clocktest.New(now), func(c *recorder.Config) { c.Backdate = 2 * 366 * 24 * time.Hour })
	if _, err := tooOld.Record(ctx, recorder.Failure{TransactionID: "ancient"}); !errors.Is(err, recorder.ErrTooOld) {
		t.Fatalf("a target two years back: %v, want ErrTooOld", err)
	}
}

// BenchmarkRecord reports the statements per failure of the normal path in steady state
// (one window, one instance): the target is at most 1.01.
func BenchmarkRecord(b *testing.B) {
	st := storetest.Store(b, 1)
	clock := clocktest.New(time.Date(2026, 10, 1, 9, 0, 1, 0, time.UTC))
	// Unchecked: a manual clock, as newRecorder's.
	rec, err := recorder.New(st, recorder.Config{InstanceID: "bench-pod", Clock: clock, UncheckedClock: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := rec.Record(ctx, recorder.Failure{TransactionID: fmt.Sprintf("tx-%d", i), ImplType: "Payment"}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	s := rec.Stats()
	b.ReportMetric(float64(s.Statements)/float64(s.Failures), "statements/failure")
}
