package cassandra_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/storetest"
)

// waitInProgressExpired returns once an IN_PROGRESS of ttl written now has expired in Cassandra:
// it writes one for a probe step and polls until the probe reads as gone. Cassandra expires cells
// on its own clock, in whole seconds, so every IN_PROGRESS of that TTL written before the probe
// has expired by then too. A TTL cannot be injected: this is the one wait on real time.
func waitInProgressExpired(t *testing.T, st *cassandra.Store, ttl time.Duration) {
	t.Helper()
	ctx := ctxT(t)
	if err := st.MarkInProgress(ctx, "expiry-probe", "Probe", "probe", time.Now(), ttl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _, err := st.Marker(ctx, "expiry-probe", "Probe")
		if err != nil {
			t.Fatal(err)
		}
		if m.State == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe's IN_PROGRESS (TTL %v) still reads %+v after 30 s", ttl, m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCommittedSurvivesLaterStates: hole 2 of issue 16. A step is COMMITTED; then a stalled
// owner's IN_PROGRESS lands (TTL 1 s), and a duplicate copy of the step is dead-lettered. The
// marker reads COMMITTED throughout, and still after the IN_PROGRESS expired (an expired cell is
// a tombstone at its write timestamp, which shadowed the older COMMITTED when both shared cells).
func TestCommittedSurvivesLaterStates(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, id := range []string{"late-in-progress", "duplicate-dead-lettered"} {
		if err := st.MarkCommitted(ctx, id, "Pay", "w-new", at, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.MarkInProgress(ctx, "late-in-progress", "Pay", "w-stalled", at.Add(-time.Second), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkDeadLettered(ctx, "duplicate-dead-lettered", "Pay", "w-duplicate", at.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, id := range []string{"late-in-progress", "duplicate-dead-lettered"} {
			m, found, err := st.Marker(ctx, id, "Pay")
			if err != nil {
				t.Fatal(err)
			}
			if !found || m.State != cassandra.MarkerCommitted || m.Owner != "w-new" || !m.UpdatedAt.Equal(at) {
				t.Errorf("%s, %s: marker %+v, found %v; want COMMITTED by w-new", when, id, m, found)
			}
		}
	}
	check("after the later writes")
	waitInProgressExpired(t, st, time.Second)
	check("after the IN_PROGRESS expired")
}

// TestInProgressReadsBesideOtherStates: a live IN_PROGRESS is reported (InProgressOwner) whatever
// state reads first, as a replayed copy runs under a DEAD_LETTERED; every state names its owner.
func TestInProgressReadsBesideOtherStates(t *testing.T) {
	ctx := ctxT(t)
	st := storetest.Store(t, 1)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	if err := st.MarkDeadLettered(ctx, "replayed", "Pay", "w-gave-up", at, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkInProgress(ctx, "replayed", "Pay", "w-replay", at.Add(time.Minute), time.Hour); err != nil {
		t.Fatal(err)
	}
	m, _, err := st.Marker(ctx, "replayed", "Pay")
	if err != nil || m.State != cassandra.MarkerDeadLettered || m.Owner != "w-gave-up" || m.InProgressOwner != "w-replay" {
		t.Fatalf("DEAD_LETTERED, then a replayed copy's IN_PROGRESS: %+v, %v", m, err)
	}
	if err := st.MarkCommitted(ctx, "replayed", "Pay", "", at, 0); !errors.Is(err, cassandra.ErrConfig) {
		t.Errorf("COMMITTED without an owner: %v, want ErrConfig", err)
	}
}

// TestUpgradeKeepsLegacyMarkers: a keyspace made by the release before the per-state cells
// (cassandra/testdata/schema-70c1d4d.cql) holds markers in execution_state. A worker of this
// release refuses it until `retryring schema apply` added the columns; then the old COMMITTED,
// DEAD_LETTERED and IN_PROGRESS read as they did, and a new IN_PROGRESS or DEAD_LETTERED of a
// legacy COMMITTED step never shadows it, not even once expired.
func TestUpgradeKeepsLegacyMarkers(t *testing.T) {
	ctx := ctxT(t)
	ks := cassandratest.KeyspaceFromFixture(t, "testdata/schema-70c1d4d.cql")
	s := cassandratest.Session(t)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	legacy := `INSERT INTO ` + ks + `.es_execution_markers (service_name, transaction_id, span_key, execution_state, lease_owner, updated_at)
VALUES ('orders', ?, 'Pay', ?, 'w-old', ?) USING TTL ?`
	for _, m := range []struct {
		id, state string
		ttl       int
	}{{"old-committed", cassandra.MarkerCommitted, 604800}, {"old-dead", cassandra.MarkerDeadLettered, 604800}, {"old-running", cassandra.MarkerInProgress, 3600}} {
		if err := s.Query(legacy, m.id, m.state, at, m.ttl).WithContext(ctx).Exec(); err != nil {
			t.Fatal(err)
		}
	}

	err := cassandra.CheckSchema(ctx, s, ks)
	if !errors.Is(err, cassandra.ErrSchemaOutdated) || !strings.Contains(err.Error(), "retryring schema apply") ||
		!strings.Contains(err.Error(), "es_execution_markers.committed_by") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("CheckSchema before the upgrade: %v; want one line naming the missing marker columns and `retryring schema apply`", err)
	}
	for i := 0; i < 2; i++ {
		if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	if err := cassandra.CheckSchema(ctx, s, ks); err != nil {
		t.Fatalf("CheckSchema after schema apply: %v", err)
	}
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: lease.RingKey{Region: "r", Cluster: "c", Service: "orders"}, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	read := func(id string) cassandra.Marker {
		t.Helper()
		m, found, err := st.Marker(ctx, id, "Pay")
		if err != nil || !found {
			t.Fatalf("marker of %s: found %v, %v", id, found, err)
		}
		return m
	}
	if m := read("old-committed"); m.State != cassandra.MarkerCommitted || m.Owner != "w-old" || !m.UpdatedAt.Equal(at) || m.StateTTL < 6*24*time.Hour {
		t.Errorf("legacy COMMITTED after the upgrade: %+v", m)
	}
	if m := read("old-dead"); m.State != cassandra.MarkerDeadLettered || m.Owner != "w-old" {
		t.Errorf("legacy DEAD_LETTERED after the upgrade: %+v", m)
	}
	if m := read("old-running"); m.State != cassandra.MarkerInProgress || m.Owner != "w-old" {
		t.Errorf("legacy IN_PROGRESS after the upgrade: %+v", m)
	}

	if err := st.MarkInProgress(ctx, "old-committed", "Pay", "w-stalled", at, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkDeadLettered(ctx, "old-committed", "Pay", "w-duplicate", at, 0); err != nil {
		t.Fatal(err)
	}
	waitInProgressExpired(t, st, time.Second)
	if m := read("old-committed"); m.State != cassandra.MarkerCommitted || m.Owner != "w-old" {
		t.Errorf("legacy COMMITTED after a new IN_PROGRESS expired and a new DEAD_LETTERED: %+v", m)
	}
	if err := st.MarkCommitted(ctx, "old-dead", "Pay", "w-new", at, 0); err != nil {
		t.Fatal(err)
	}
	if m := read("old-dead"); m.State != cassandra.MarkerCommitted || m.Owner != "w-new" {
		t.Errorf("a new COMMITTED over a legacy DEAD_LETTERED: %+v; want COMMITTED first", m)
	}
}

// TestExpiringFollowsTheReadOrder: the part of a marker that finishes a row is the first in the
// read order COMMITTED, floor, DEAD_LETTERED; its TTL is the one that must not run out under a
// kept bucket.
func TestExpiringFollowsTheReadOrder(t *testing.T) {
	day := 24 * time.Hour
	row := cassandra.Copy{Attempt: 1}
	for _, c := range []struct {
		name string
		m    cassandra.Marker
		want bool
	}{
		{"COMMITTED for a week, over a floor that expires in an hour",
			cassandra.Marker{State: cassandra.MarkerCommitted, StateTTL: 7 * day, Floor: cassandra.Copy{Attempt: 2}, HasFloor: true, FloorTTL: time.Hour}, false},
		{"COMMITTED that expires in an hour",
			cassandra.Marker{State: cassandra.MarkerCommitted, StateTTL: time.Hour}, true},
		{"a floor past the row that expires in an hour, under a DEAD_LETTERED for a week",
			cassandra.Marker{State: cassandra.MarkerDeadLettered, StateTTL: 7 * day, Floor: cassandra.Copy{Attempt: 2}, HasFloor: true, FloorTTL: time.Hour}, true},
		{"DEAD_LETTERED before floors, for a week",
			cassandra.Marker{State: cassandra.MarkerDeadLettered, StateTTL: 7 * day}, false},
	} {
		if got := c.m.Expiring(row, day); got != c.want {
			t.Errorf("%s: Expiring within a day = %v, want %v", c.name, got, c.want)
		}
	}
}
