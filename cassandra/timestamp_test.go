package cassandra_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/testkit/storetest"
	"github.com/retryring/retryring/window"
)

// skewedStore is a Store on the shared keyspace whose clock is c.
func skewedStore(t *testing.T, c lease.Clock) *cassandra.Store {
	t.Helper()
	session, ks := storetest.Keyspace(t)
	st, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: ks, Ring: storetest.Ring(t), WindowMinutes: 5, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// writetime reads WRITETIME(column) of the one row a query selects.
func writetime(t *testing.T, column, table, where string, args ...any) int64 {
	t.Helper()
	session, ks := storetest.Keyspace(t)
	var ts int64
	if err := session.Query("SELECT WRITETIME("+column+") FROM "+ks+"."+table+" WHERE "+where, args...).Scan(&ts); err != nil {
		t.Fatalf("WRITETIME(%s) of %s: %v", column, table, err)
	}
	return ts
}

// A process whose clock runs 900 ms behind Cassandra's writes rows stamped 900 ms back: the
// timestamp is the Store's clock, not gocql's time.Now when it writes the frame. Cassandra's
// tombstone wins a tie, which is how a delete stamped before a row tells whether it hides it.
func TestWritesCarryTheStoreClock(t *testing.T) {
	ctx := ctxT(t)
	behind := time.Now().Add(-900 * time.Millisecond).Truncate(time.Microsecond)
	st := skewedStore(t, clocktest.New(behind))
	r := st.Ring()
	w := mustWindow(t, window.DateOf(behind), 0, 5)
	want := behind.UnixMicro()

	single := cassandra.BucketKey{Window: w, InstanceID: "pod-a", Bucket: 0}
	if err := st.InsertTransaction(ctx, single, cassandra.Transaction{ID: "tx-single", AddedAt: behind, ImplType: "Step"}); err != nil {
		t.Fatal(err)
	}
	batched := cassandra.BucketKey{Window: w, InstanceID: "pod-a", Bucket: 1}
	if err := st.InsertTransactions(ctx, batched, []cassandra.Transaction{{ID: "tx-batched", AddedAt: behind, ImplType: "Step"}}); err != nil {
		t.Fatal(err)
	}
	tier5 := "region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ? AND instance_id = ? AND bucket_index = ? AND transaction_id = ?"
	for _, c := range []struct {
		what string
		got  int64
	}{
		{"tier-5 row (one statement)", writetime(t, "added_datetime", "es_retry_transactions_by_instance", tier5,
			r.Region, r.Cluster, r.Service, w.Day.Time(), w.Minute, "pod-a", 0, "tx-single")},
		{"tier-5 row (unlogged batch)", writetime(t, "added_datetime", "es_retry_transactions_by_instance", tier5,
			r.Region, r.Cluster, r.Service, w.Day.Time(), w.Minute, "pod-a", 1, "tx-batched")},
	} {
		if c.got != want {
			t.Errorf("%s: WRITETIME %d, want the Store's clock %d (%v off)", c.what, c.got, want, time.Duration(c.got-want)*time.Microsecond)
		}
	}

	// A directory row has no cell of its own to read WRITETIME of: a delete just before its
	// timestamp leaves it, a delete at it hides it.
	if err := st.InsertInstance(ctx, w, "pod-a"); err != nil {
		t.Fatal(err)
	}
	session, ks := storetest.Keyspace(t)
	del := "DELETE FROM " + ks + ".es_instances_by_retry_window USING TIMESTAMP ? WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ? AND instance_id_token = ? AND instance_id = ?"
	for _, c := range []struct {
		at   int64
		left bool
	}{{want - 1, true}, {want, false}} {
		if err := session.Query(del, c.at, r.Region, r.Cluster, r.Service, w.Day.Time(), w.Minute, cassandra.Token("pod-a"), "pod-a").Exec(); err != nil {
			t.Fatal(err)
		}
		if left, err := st.HasInstances(ctx, w); err != nil || left != c.left {
			t.Fatalf("tier-3 row after a delete at %d (the Store's clock %d): present %v, %v; want %v", c.at, want, left, err, c.left)
		}
	}
}

// countingClock counts its readings.
type countingClock struct {
	lease.Clock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Clock.Now() }

// Each statement reads the clock once, when it is built: gocql keeps the value with the query,
// so a retry or a speculative execution sends the same timestamp, where gocql's own default reads
// time.Now again for every frame it writes. Reads and compare-and-sets do not read it.
func TestOneTimestampPerStatement(t *testing.T) {
	ctx := ctxT(t)
	c := &countingClock{Clock: clocktest.New(time.Now())}
	st := skewedStore(t, c)
	w := mustWindow(t, window.DateOf(time.Now()), 0, 5)
	rows := make([]cassandra.Transaction, 150) // two batches
	for i := range rows {
		rows[i] = cassandra.Transaction{ID: fmt.Sprintf("tx-%d", i), ImplType: "Step"}
	}
	for _, step := range []struct {
		what  string
		reads int64
		do    func() error
	}{
		{"insert instance", 1, func() error { return st.InsertInstance(ctx, w, "pod-a") }},
		{"insert bucket", 1, func() error { return st.InsertBucket(ctx, w, "pod-a", 3) }},
		{"two batches", 2, func() error {
			return st.InsertTransactions(ctx, cassandra.BucketKey{Window: w, InstanceID: "pod-a"}, rows)
		}},
		{"list instances", 0, func() error { _, err := st.ListAllInstances(ctx, w, 0); return err }},
		{"checkpoint compare-and-set", 0, func() error { return st.LowerWindowCheckpoint(ctx, w.Day, w.Minute) }},
	} {
		before := c.reads.Load()
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if got := c.reads.Load() - before; got != step.reads {
			t.Errorf("%s read the Store's clock %d times, want %d", step.what, got, step.reads)
		}
	}
}

// Compare-and-sets carry no timestamp of the process: a checkpoint written by a Store whose
// clock is a day behind is stamped by Cassandra (its Paxos ballot), within the hour of now.
func TestCompareAndSetTakesCassandraTimestamp(t *testing.T) {
	ctx := ctxT(t)
	dayBehind := time.Now().Add(-24 * time.Hour)
	st := skewedStore(t, clocktest.New(dayBehind))
	r := st.Ring()
	d := window.DateOf(time.Now())
	if err := st.LowerWindowCheckpoint(ctx, d, 600); err != nil {
		t.Fatal(err)
	}
	got := time.UnixMicro(writetime(t, "first_live_minute", "es_window_checkpoints",
		"region = ? AND cluster = ? AND service_name = ? AND date_of_year = ?", r.Region, r.Cluster, r.Service, d.Time()))
	if got.Before(time.Now().Add(-time.Hour)) {
		t.Fatalf("checkpoint stamped %v: the Store's clock (%v), not Cassandra's", got, dayBehind)
	}
}
