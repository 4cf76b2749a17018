package worker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/clocktest"
	"github.com/retryring/retryring/window"
)

// Invariant 7 (issue 16, hole 2): a step committed once is never executed again by a re-scan,
// whatever write of a stalled or duplicate copy lands after the commit. These tests fire that
// write at the exact step, wait (in real time: a Cassandra TTL cannot be injected) for an
// IN_PROGRESS to expire, and then pass over the step's bucket.

// waitInProgressExpired returns once an IN_PROGRESS of ttl written now has expired: it writes one
// for a probe step and polls until the probe reads as gone. Cassandra expires cells on its own
// clock in whole seconds, so every IN_PROGRESS of that TTL written before it has expired too.
func (e *env) waitInProgressExpired(ttl time.Duration) {
	e.t.Helper()
	if err := e.store.MarkInProgress(context.Background(), "expiry-probe", "Payment", "probe", noon, ttl); err != nil {
		e.t.Fatal(err)
	}
	waitMarkerState(e.t, e, "expiry-probe", "")
}

// TestLateInProgressLeavesCommitted: x was committed by another worker; then that step's
// IN_PROGRESS from a stalled owner lands, with a 1 s TTL, and expires. x's bucket is still there
// (kept, say, by a failed query): the pass over it calls nobody for x.
func TestLateInProgressLeavesCommitted(t *testing.T) {
	e := newEnv(t, 1, noon)
	e.record("pod-a", e.win(window.DateOf(noon), 620), 10, "x", "fresh")
	e.commitThenLateWrites(t, "x", func(ctx context.Context) error {
		return e.store.MarkInProgress(ctx, "x", "Payment", "w-stalled", noon, time.Second)
	})
	e.waitInProgressExpired(time.Second)
	e.passCallsNobodyFor(t, "x")
}

// TestDuplicateDeadLetteredLeavesCommitted: the same step recorded under two instance ids; one
// copy committed, the other was refused (a 4xx after the success) and dead-lettered, with the
// writes of a dead letter: its floor past the generation, then DEAD_LETTERED. The marker reads
// COMMITTED, and the pass over the committed copy's bucket calls nobody.
func TestDuplicateDeadLetteredLeavesCommitted(t *testing.T) {
	e := newEnv(t, 1, noon)
	e.record("pod-a", e.win(window.DateOf(noon), 630), 10, "x", "fresh")
	e.commitThenLateWrites(t, "x", func(ctx context.Context) error {
		if err := e.store.SetFloor(ctx, "x", "Payment", cassandra.Copy{Replay: 1}, 0); err != nil {
			return err
		}
		return e.store.MarkDeadLettered(ctx, "x", "Payment", "w-duplicate", noon, 0)
	})
	e.passCallsNobodyFor(t, "x")
}

// TestUpgradedKeyspaceLegacyCommittedFinishesItsRow: a keyspace the release before the
// per-state cells made, with x COMMITTED in execution_state as that release wrote it; after
// `schema apply` (ApplySchema) a new IN_PROGRESS of x lands late and expires, and the pass over
// x's bucket still calls nobody for it.
func TestUpgradedKeyspaceLegacyCommittedFinishesItsRow(t *testing.T) {
	s := cassandratest.Session(t)
	ks := cassandratest.KeyspaceFromFixture(t, filepath.Join("..", "cassandra", "testdata", "schema-70c1d4d.cql"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	legacy := `INSERT INTO ` + ks + `.es_execution_markers (service_name, transaction_id, span_key, execution_state, lease_owner, updated_at)
VALUES ('orders', 'x', 'Payment', 'COMMITTED', 'w-old', ?) USING TTL 604800`
	if err := s.Query(legacy, noon).WithContext(ctx).Exec(); err != nil {
		t.Fatal(err)
	}
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatal(err)
	}
	ring := lease.RingKey{Region: "eu-test", Cluster: "c1", Service: "orders"}
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, session: s, ks: ks, ring: ring, length: 1, store: st, clock: clocktest.New(noon)}
	e.record("pod-a", e.win(window.DateOf(noon), 640), 10, "x", "fresh")
	if err := e.store.MarkInProgress(ctx, "x", "Payment", "w-new", noon, time.Second); err != nil {
		t.Fatal(err)
	}
	e.waitInProgressExpired(time.Second)
	e.passCallsNobodyFor(t, "x")
}

// commitThenLateWrites marks step Payment of id COMMITTED by another worker, then runs late: the
// writes of a stalled or duplicate copy that land after the commit.
func (e *env) commitThenLateWrites(t *testing.T, id string, late func(ctx context.Context) error) {
	t.Helper()
	ctx := context.Background()
	if err := e.store.MarkCommitted(ctx, id, "Payment", "w-other", noon, 0); err != nil {
		t.Fatal(err)
	}
	if err := late(ctx); err != nil {
		t.Fatal(err)
	}
}

// passCallsNobodyFor passes once over the readable windows: id's marker reads COMMITTED, id is
// skipped as committed and never called, and the other rows of its bucket run.
func (e *env) passCallsNobodyFor(t *testing.T, id string) {
	t.Helper()
	if m, ok := e.marker(id); !ok || m.State != cassandra.MarkerCommitted {
		t.Errorf("marker of %s before the pass: %+v, found %v; want COMMITTED", id, m, ok)
	}
	ex := &recordingExecutor{}
	sc := e.scanner(e.config("w0"), e.guard(fullRing(), 0, 1, time.Hour), ex)
	if _, err := sc.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if runs := ex.runs(); runs[id] != 0 || runs["fresh"] != 1 {
		t.Fatalf("the pass ran %v; want %s never (it was COMMITTED) and fresh once", runs, id)
	}
	if s := sc.Stats(); s.SkippedCommitted != 1 {
		t.Errorf("the pass skipped %d rows as COMMITTED, want 1 (%s)", s.SkippedCommitted, id)
	}
}
