package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/window"
)

// TestDeadLettersReplayRefusesAnUntrustedClock runs `deadletters replay` against the real
// Cassandra with its clock 3 s ahead (a 2 s bound allows 1 s per process): it measures, refuses
// with the measured offset and the bound, and writes nothing (no run start, no copy, no floor, no
// mark). With the clock set right, the same command replays the dead letter.
func TestDeadLettersReplayRefusesAnUntrustedClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session := cassandratest.Session(t)
	ks := cassandratest.NewKeyspace(t)
	if err := cassandra.ApplySchema(ctx, session, ks, cassandra.Replication{}); err != nil {
		t.Fatal(err)
	}
	ring := lease.RingKey{Region: "local", Cluster: "default", Service: "orders"}
	st, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1})
	if err != nil {
		t.Fatal(err)
	}
	deadAt := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	w, err := window.Of(deadAt.Add(-time.Minute), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.InsertDeadLetter(ctx, cassandra.DeadLetter{
		Bucket:      cassandra.BucketKey{Window: w, InstanceID: "pod-1"},
		Transaction: cassandra.Transaction{ID: "tx-refused", ImplType: "Payment", AddedAt: deadAt.Add(-time.Minute)},
		LastStatus:  422, DeadAt: deadAt, WorkerID: "w1",
	}); err != nil {
		t.Fatal(err)
	}
	replay := func(clock lease.Clock) (string, error) {
		cmd := deadLettersReplayCommand(clock)
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"--cassandra", cassandratest.Addr(), "--keyspace", ks, "--id", "fix-1", "--since", "24h", "--rate", "0"})
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}

	clock := &skewedClock{}
	clock.skew(3 * time.Second)
	if _, err := replay(clock); err == nil || !strings.Contains(err.Error(), "beyond the bound: max_clock_offset 2s allows 1s") ||
		!strings.Contains(err.Error(), "nothing replayed") {
		t.Fatalf("replay with a clock 3 s ahead: %v; want refused with the measured offset and the bound", err)
	}
	var started time.Time
	if err := session.Query(`SELECT started_at FROM `+ks+`.es_dead_letter_replays WHERE region = ? AND cluster = ? AND service_name = ? AND replay_id = ?`,
		ring.Region, ring.Cluster, ring.Service, "fix-1").WithContext(ctx).Scan(&started); err == nil {
		t.Errorf("the refused replay recorded its start at %v", started)
	}
	if m, found, err := st.Marker(ctx, "tx-refused", "Payment"); err != nil || (found && m.HasFloor) {
		t.Errorf("marker after the refused replay: %+v, %v, %v; want no floor", m, found, err)
	}
	for _, y := range []int{time.Now().UTC().Year() - 1, time.Now().UTC().Year()} {
		if days, _, err := st.ListLiveDays(ctx, y); err != nil || len(days) != 0 {
			t.Errorf("directory days of %d after the refused replay: %v, %v; want none (no copy)", y, days, err)
		}
	}
	dls, err := st.ListDeadLetters(ctx, window.DateOf(deadAt))
	if err != nil || len(dls) != 1 || dls[0].ReplayedBy != "" {
		t.Fatalf("dead letters after the refused replay: %+v, %v; want the one, not marked", dls, err)
	}

	clock.skew(0)
	out, err := replay(clock)
	if err != nil || !strings.Contains(out, "replayed 1 of 1 matching") {
		t.Fatalf("replay with the clock set right: %v\n%s", err, out)
	}
}
