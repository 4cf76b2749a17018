package cassandra_test

import (
	"context"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/storetest"
)

func TestApplySchemaIsIdempotent(t *testing.T) {
	s, ks := storetest.Keyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	for _, table := range cassandra.Tables {
		var gc int
		err := s.Query(`SELECT gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`, ks, table).Scan(&gc)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if table == "es_retry_transactions_by_instance" && gc != 86400 {
			t.Fatalf("tier 5 gc_grace_seconds = %d, want 86400", gc)
		}
	}
}

func TestConnect(t *testing.T) {
	s, _ := storetest.Keyspace(t) // fails the test when Cassandra is missing
	_ = s
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := cassandra.Connect(ctx, cassandra.Config{Hosts: []string{addr()}, Consistency: "ONE", AllowWeakConsistency: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	var v string
	if err := session.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("connected, Cassandra %s", v)
}
