package cassandra_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

func mustWindow(t *testing.T, d window.Date, minute, length int) window.Window {
	t.Helper()
	w, err := window.New(d, minute, length)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestDirectoryRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 5)
	d1 := window.Date{Year: 2025, Month: time.December, Day: 31}
	d2 := window.Date{Year: 2026, Month: time.January, Day: 1}
	d3 := window.Date{Year: 2026, Month: time.February, Day: 3}

	for _, d := range []window.Date{d3, d2, d1} {
		if err := st.InsertDay(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	days, err := st.ListDays(ctx, 2026, window.FirstOfYear(2026))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(days, []window.Date{d2, d3}) {
		t.Fatalf("days of 2026 = %v, want [%s %s] (ascending)", days, d2, d3)
	}
	if days, _ := st.ListDays(ctx, 2026, d2.AddDays(1)); !slices.Equal(days, []window.Date{d3}) {
		t.Fatalf("days of 2026 from %s = %v", d2.AddDays(1), days)
	}
	if days, _ := st.ListDays(ctx, 2025, window.FirstOfYear(2025)); !slices.Equal(days, []window.Date{d1}) {
		t.Fatalf("days of 2025 = %v", days)
	}

	for _, m := range []int{1435, 0, 600, 5} {
		if err := st.InsertWindow(ctx, mustWindow(t, d2, m, 5)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := st.ListWindows(ctx, d2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mins []int
	for _, w := range ws {
		if w.Day != d2 || w.Length != 5 {
			t.Fatalf("window %s not of %s/5m", w, d2)
		}
		mins = append(mins, w.Minute)
	}
	if !slices.Equal(mins, []int{0, 5, 600, 1435}) {
		t.Fatalf("windows = %v, want ascending [0 5 600 1435]", mins)
	}
	if ws, _ := st.ListWindows(ctx, d2, 600); len(ws) != 2 || ws[0].Minute != 600 {
		t.Fatalf("windows from 600 = %v", ws)
	}
	w := mustWindow(t, d2, 600, 5)
	if ok, err := st.HasWindow(ctx, w); err != nil || !ok {
		t.Fatalf("HasWindow = %v, %v", ok, err)
	}
	if ok, err := st.HasDay(ctx, d2); err != nil || !ok {
		t.Fatalf("HasDay = %v, %v", ok, err)
	}

	for _, id := range []string{"pod-b", "pod-a", "pod-c"} {
		if err := st.InsertInstance(ctx, w, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.InsertInstance(ctx, w, ""); !errors.Is(err, cassandra.ErrInstanceID) {
		t.Fatalf("empty instance id: %v", err)
	}
	all, err := st.ListAllInstances(ctx, w, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("instances = %v, %v", all, err)
	}
	for i, in := range all {
		if in.Token != cassandra.Token(in.ID) {
			t.Fatalf("instance %s stored with token %d, want %d", in.ID, in.Token, cassandra.Token(in.ID))
		}
		if i > 0 && all[i-1].Token > in.Token {
			t.Fatalf("instances not in token order: %v", all)
		}
	}
	if one, err := st.ListAllInstances(ctx, w, 1); err != nil || len(one) != 1 || one[0] != all[0] {
		t.Fatalf("limit 1 = %v, %v", one, err)
	}

	for _, b := range []int{2, 0, 1} {
		if err := st.InsertBucket(ctx, w, "pod-a", b); err != nil {
			t.Fatal(err)
		}
	}
	if bs, err := st.ListBuckets(ctx, w, "pod-a"); err != nil || !slices.Equal(bs, []int{0, 1, 2}) {
		t.Fatalf("buckets = %v, %v", bs, err)
	}

	// Deletes, tier by tier.
	if err := st.DeleteBucket(ctx, w, "pod-a", 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if bs, _ := st.ListBuckets(ctx, w, "pod-a"); !slices.Equal(bs, []int{0, 2}) {
		t.Fatalf("buckets after delete = %v", bs)
	}
	for _, id := range []string{"pod-a", "pod-b", "pod-c"} {
		if err := st.DeleteInstance(ctx, w, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if any, err := st.HasInstances(ctx, w); err != nil || any {
		t.Fatalf("HasInstances after deletes = %v, %v", any, err)
	}
	if err := st.DeleteWindow(ctx, w, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := st.HasWindow(ctx, w); ok {
		t.Fatal("window still there")
	}
	if err := st.DeleteDay(ctx, d2, time.Now()); err != nil {
		t.Fatal(err)
	}
	if days, _ := st.ListDays(ctx, 2026, window.FirstOfYear(2026)); !slices.Equal(days, []window.Date{d3}) {
		t.Fatalf("days after delete = %v", days)
	}
}

func TestInstancesByTokenRange(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	w := mustWindow(t, window.Date{Year: 2026, Month: time.March, Day: 1}, 17, 1)
	want := map[string]int64{}
	for i := range 120 {
		id := fmt.Sprintf("svc-pod-%03d", i)
		want[id] = cassandra.Token(id)
		if err := st.InsertInstance(ctx, w, id); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, rg := range lease.Split(5) {
		in, err := st.ListInstances(ctx, w, rg)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range in {
			if !rg.Contains(i.Token) {
				t.Fatalf("%s (token %d) returned for %s", i.ID, i.Token, rg)
			}
			if seen[i.ID] {
				t.Fatalf("%s returned for two ranges", i.ID)
			}
			seen[i.ID] = true
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("ranges returned %d instances, want %d", len(seen), len(want))
	}
	// A range that holds exactly one instance: its token, inclusive at both ends.
	var one string
	for id := range want {
		one = id
		break
	}
	in, err := st.ListInstances(ctx, w, lease.Range{Start: want[one], End: want[one]})
	if err != nil || len(in) != 1 || in[0].ID != one {
		t.Fatalf("single-token range = %v, %v", in, err)
	}
	if in, _ := st.ListInstances(ctx, w, lease.FullRing); len(in) != len(want) {
		t.Fatalf("full ring = %d instances", len(in))
	}
}

func TestBucketPagingAndPartitionDelete(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1) // pages of 100 rows
	w := mustWindow(t, window.Date{Year: 2026, Month: time.March, Day: 2}, 0, 1)
	b := cassandra.BucketKey{Window: w, InstanceID: "pod-1", Bucket: 3}
	added := time.Date(2026, 3, 1, 23, 59, 1, 123e6, time.UTC)
	var want []cassandra.Transaction
	for i := range 250 {
		want = append(want, cassandra.Transaction{
			ID: fmt.Sprintf("tx-%04d", i), AddedAt: added.Add(time.Duration(i) * time.Millisecond),
			AllocationKey: "alloc", ImplType: "PaymentStep", Attempt: i % 3,
		})
	}
	if err := st.InsertTransaction(ctx, b, want[0]); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertTransactions(ctx, b, want[1:]); err != nil {
		t.Fatal(err)
	}

	var got []cassandra.Transaction
	var pages int
	var state []byte
	for {
		rows, next, err := st.ReadBucketPage(ctx, b, state)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(rows) > 100 {
			t.Fatalf("page of %d rows, page size is 100", len(rows))
		}
		got = append(got, rows...)
		if next == nil {
			break
		}
		state = next
	}
	if pages < 3 {
		t.Fatalf("250 rows in %d pages of 100", pages)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	if len(got) != len(want) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].AddedAt.Equal(want[i].AddedAt) || got[i].AllocationKey != want[i].AllocationKey ||
			got[i].ImplType != want[i].ImplType || got[i].Attempt != want[i].Attempt {
			t.Fatalf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	n := 0
	stop := errors.New("stop")
	err := st.ForEachTransaction(ctx, b, func(cassandra.Transaction) error {
		n++
		if n == 150 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 150 {
		t.Fatalf("ForEachTransaction stopped at %d with %v", n, err)
	}

	if err := st.DeleteTransaction(ctx, b, "tx-0000"); err != nil {
		t.Fatal(err)
	}
	n = 0
	if err := st.ForEachTransaction(ctx, b, func(cassandra.Transaction) error { n++; return nil }); err != nil || n != 249 {
		t.Fatalf("after row delete: %d rows, %v", n, err)
	}
	if err := st.DeleteBucketPartition(ctx, b, time.Now()); err != nil {
		t.Fatal(err)
	}
	rows, next, err := st.ReadBucketPage(ctx, b, nil)
	if err != nil || len(rows) != 0 || next != nil {
		t.Fatalf("after partition delete: %d rows, next %v, %v", len(rows), next, err)
	}
	if st.Statements() == 0 {
		t.Fatal("statements not counted")
	}
}

func TestMarkers(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if _, found, err := st.Marker(ctx, "tx-1", "Pay"); err != nil || found {
		t.Fatalf("marker before any write: found=%v, %v", found, err)
	}
	if err := st.MarkInProgress(ctx, "tx-1", "Pay", "worker-a", at, 2500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	m, found, err := st.Marker(ctx, "tx-1", "Pay")
	if err != nil || !found || m.State != cassandra.MarkerInProgress || m.Owner != "worker-a" || !m.UpdatedAt.Equal(at) {
		t.Fatalf("in progress marker = %+v, %v, %v", m, found, err)
	}
	ttl := func() int {
		m, _, err := st.Marker(ctx, "tx-1", "Pay")
		if err != nil {
			t.Fatal(err)
		}
		return int(m.StateTTL / time.Second)
	}
	if n := ttl(); n < 1 || n > 3 {
		t.Fatalf("IN_PROGRESS TTL = %d s, want 3 (2.5 s rounded up)", n)
	}
	if err := st.MarkCommitted(ctx, "tx-1", "Pay", "worker-a", at.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := st.Marker(ctx, "tx-1", "Pay"); m.State != cassandra.MarkerCommitted {
		t.Fatalf("marker = %+v, want COMMITTED", m)
	}
	if n := ttl(); n < 7*24*3600-60 || n > 7*24*3600 {
		t.Fatalf("COMMITTED TTL = %d s, want 7 days", n)
	}
	if err := st.MarkDeadLettered(ctx, "tx-2", "Pay", "worker-b", at, time.Hour); err != nil {
		t.Fatal(err)
	}
	if m, found, err := st.Marker(ctx, "tx-2", "Pay"); err != nil || !found || m.State != cassandra.MarkerDeadLettered || m.Owner != "worker-b" {
		t.Fatalf("dead-lettered marker = %+v, %v, %v", m, found, err)
	}
	if err := st.MarkInProgress(ctx, "tx-1", "Pay", "w", at, 0); !errors.Is(err, cassandra.ErrConfig) {
		t.Fatalf("zero TTL: %v", err)
	}
}

func TestDeadLetters(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	w := mustWindow(t, window.Date{Year: 2026, Month: time.March, Day: 2}, 7, 1)
	dl := cassandra.DeadLetter{
		Bucket: cassandra.BucketKey{Window: w, InstanceID: "pod-9", Bucket: 1},
		Transaction: cassandra.Transaction{ID: "tx-9", AddedAt: time.Date(2026, 3, 2, 0, 6, 0, 0, time.UTC),
			AllocationKey: "k", ImplType: "Ship", Attempt: 10},
		LastStatus: 503, LastError: "service unavailable", WorkerID: "worker-1",
		DeadAt: time.Date(2026, 3, 3, 1, 0, 0, 0, time.UTC),
	}
	if err := st.InsertDeadLetter(ctx, dl); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListDeadLetters(ctx, window.Date{Year: 2026, Month: time.March, Day: 3})
	if err != nil || len(got) != 1 {
		t.Fatalf("dead letters = %v, %v", got, err)
	}
	g := got[0]
	if g.Bucket != dl.Bucket || g.Transaction.ID != "tx-9" || !g.Transaction.AddedAt.Equal(dl.Transaction.AddedAt) ||
		g.LastStatus != 503 || g.LastError != dl.LastError || !g.DeadAt.Equal(dl.DeadAt) || g.WorkerID != "worker-1" ||
		g.Transaction.Attempt != 10 || g.Transaction.ImplType != "Ship" {
		t.Fatalf("dead letter = %+v, want %+v", g, dl)
	}
	// Another step of the same transaction given up on the same day is a row of its own (its
	// marker is its own too); the same step again overwrites its row (a retried write).
	pay := dl
	pay.Transaction.ImplType, pay.LastStatus = "Pay", 422
	for _, d := range []cassandra.DeadLetter{pay, dl} {
		if err := st.InsertDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.ListDeadLetters(ctx, window.Date{Year: 2026, Month: time.March, Day: 3})
	if err != nil || len(got) != 2 || got[0].Transaction.ImplType != "Pay" || got[0].LastStatus != 422 || got[1].Transaction.ImplType != "Ship" {
		t.Fatalf("two steps of tx-9 dead-lettered: %+v, %v; want Pay and Ship", got, err)
	}
}

// TestMarkerFloor: the floor has cells of its own (IN_PROGRESS and COMMITTED leave it alone, and
// it outlives an IN_PROGRESS that expires) and never goes down, whatever order writes land in.
func TestMarkerFloor(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	floor := func(id string) (cassandra.Copy, bool) {
		t.Helper()
		m, _, err := st.Marker(ctx, id, "Pay")
		if err != nil {
			t.Fatal(err)
		}
		return m.Floor, m.HasFloor
	}
	if err := st.MarkInProgress(ctx, "tx-f", "Pay", "w", at, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := floor("tx-f"); ok {
		t.Fatal("IN_PROGRESS alone reads as a floor")
	}
	for _, c := range []cassandra.Copy{{Attempt: 3}, {Attempt: 1}, {Attempt: 2}} {
		if err := st.SetFloor(ctx, "tx-f", "Pay", c, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := floor("tx-f"); !ok || c != (cassandra.Copy{Attempt: 3}) {
		t.Fatalf("floor after writes a3, a1, a2 = %v, %v; want r0/a3 (never lowered)", c, ok)
	}
	if err := st.SetFloor(ctx, "tx-f", "Pay", cassandra.Copy{Replay: 1}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.SetFloor(ctx, "tx-f", "Pay", cassandra.Copy{Attempt: 9}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if c, _ := floor("tx-f"); c != (cassandra.Copy{Replay: 1}) {
		t.Fatalf("floor = %v; want r1/a0 (a replay generation is above every attempt of the last)", c)
	}
	// The IN_PROGRESS cells expire (TTL 1 s, real time); the floor stays.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, found, err := st.Marker(ctx, "tx-f", "Pay")
		if err != nil {
			t.Fatal(err)
		}
		if m.State == "" {
			if !found || !m.HasFloor || m.Floor != (cassandra.Copy{Replay: 1}) {
				t.Fatalf("after IN_PROGRESS expired: %+v, found %v; want the floor r1/a0 alone", m, found)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("IN_PROGRESS still there after 30 s: %+v", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := st.MarkCommitted(ctx, "tx-f", "Pay", "w", at, 0); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := st.Marker(ctx, "tx-f", "Pay"); m.State != cassandra.MarkerCommitted || m.Floor != (cassandra.Copy{Replay: 1}) {
		t.Fatalf("after COMMITTED: %+v; want COMMITTED with the floor kept", m)
	}
	if err := st.SetFloor(ctx, "tx-f", "Pay", cassandra.Copy{Attempt: -1}, 0); !errors.Is(err, cassandra.ErrConfig) {
		t.Fatalf("negative floor: %v", err)
	}
}

// TestApplySchemaAddsColumns: a keyspace made by a release before the replay column and the
// floor gets them from ApplySchema (twice is harmless), and its old rows read replay 0.
func TestApplySchemaAddsColumns(t *testing.T) {
	ctx := ctxT(t)
	s, ks := storetest.Keyspace(t)
	for _, stmt := range []string{
		`ALTER TABLE ` + ks + `.es_retry_transactions_by_instance DROP replay`,
		`ALTER TABLE ` + ks + `.es_execution_markers DROP floor_attempt`,
	} {
		if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := s.Query(`INSERT INTO ` + ks + `.es_retry_transactions_by_instance (region, cluster, service_name, date_of_year, minute_of_day, instance_id, bucket_index, transaction_id, attempt)
VALUES ('r', 'c', 's', '2026-03-01', 5, 'pod', 0, 'old', 2)`).WithContext(ctx).Exec(); err != nil {
		t.Fatal(err)
	}
	err := cassandra.CheckSchema(ctx, s, ks)
	if !errors.Is(err, cassandra.ErrSchemaOutdated) || !strings.Contains(err.Error(), "es_retry_transactions_by_instance.replay") ||
		!strings.Contains(err.Error(), "es_execution_markers.floor_attempt") || strings.Contains(err.Error(), "floor_replay") {
		t.Fatalf("CheckSchema on the old keyspace: %v; want ErrSchemaOutdated naming replay and floor_attempt only", err)
	}
	for i := 0; i < 2; i++ {
		if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	if err := cassandra.CheckSchema(ctx, s, ks); err != nil {
		t.Fatalf("CheckSchema after ApplySchema: %v", err)
	}
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: lease.RingKey{Region: "r", Cluster: "c", Service: "s"}, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	w := mustWindow(t, window.Date{Year: 2026, Month: time.March, Day: 1}, 5, 1)
	rows, _, err := st.ReadBucketPage(ctx, cassandra.BucketKey{Window: w, InstanceID: "pod"}, nil)
	if err != nil || len(rows) != 1 || rows[0].ID != "old" || rows[0].Replay != 0 || rows[0].Attempt != 2 {
		t.Fatalf("old row = %+v, %v; want old at r0/a2", rows, err)
	}
	if err := st.SetFloor(ctx, "old", "Pay", cassandra.Copy{Attempt: 3}, time.Hour); err != nil {
		t.Fatalf("floor on the migrated table: %v", err)
	}
}
