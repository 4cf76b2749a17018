package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/cassandratest"
)

// TestSchemaApplyRefusesAReplicationTheClusterCannotMeet runs `schema apply` against the shared
// single node (datacenter1) with replications it has too few nodes for: each is refused with the
// shortfall and the cluster's nodes, and no keyspace is created.
func TestSchemaApplyRefusesAReplicationTheClusterCannotMeet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session := cassandratest.Session(t)
	for _, c := range []struct{ replication, want string }{
		{"3", "cassandra: replication refused: replication 3 needs 3 nodes; the cluster has 1 node in datacenter1"},
		{"dc1=3", "cassandra: replication refused: replication dc1=3 needs 3 nodes in dc1; the cluster has 1 node in datacenter1"},
	} {
		ks := "t_schema_refused_" + randomHex(t)
		cmd := newSchemaCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"apply", "--cassandra", cassandratest.Addr(), "--keyspace", ks, "--replication", c.replication})
		err := cmd.ExecuteContext(ctx)
		if err == nil || err.Error() != c.want || !errors.Is(err, cassandra.ErrReplicationUnmet) {
			t.Fatalf("schema apply --replication %s on one node: %v; want %q", c.replication, err, c.want)
		}
		var name string
		err = session.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, ks).WithContext(ctx).Scan(&name)
		if !errors.Is(err, gocql.ErrNotFound) {
			_ = session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
			t.Fatalf("keyspace %s after the refused apply: %q, %v; want none", ks, name, err)
		}
	}
}

// TestRecordSaysWhatFailedWhenNothingIsRecorded records into a keyspace of replication factor 3
// on the shared single node, made by hand as a keyspace from before schema apply checked the
// replication: every write fails at LOCAL_QUORUM, and record's summary says so, with the first
// error, instead of a cost per recorded failure (statements divided by zero failures).
func TestRecordSaysWhatFailedWhenNothingIsRecorded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session := cassandratest.Session(t)
	ks := "t_record_rf3_" + randomHex(t)
	stmts, err := cassandra.Schema(ks, cassandra.Replication{Factor: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", ks, err)
		}
	})
	for _, stmt := range stmts {
		if err := session.Query(stmt).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	cmd := newRecordCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--cassandra", cassandratest.Addr(), "--keyspace", ks, "--count", "4", "--instances", "2", "--concurrency", "1"})
	err = cmd.ExecuteContext(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "record: 4 failures not recorded, first error: ") {
		t.Fatalf("record into replication factor 3 on one node: %v; want every failure not recorded", err)
	}
	text := out.String()
	for _, want := range []string{
		"recorded none of 4 failures across 2 instances in ",
		": every write failed (",
		" statements sent); first error: ",
		"LOCAL_QUORUM",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("record's output lacks %q:\n%s", want, text)
		}
	}
	t.Logf("record said:\n%s", text)
	if strings.Contains(text, "statements per failure") {
		t.Errorf("record's output gives a cost per failure with none recorded:\n%s", text)
	}
}

func TestRecordSummary(t *testing.T) {
	got := recordSummary(1000, 2, 3, 2*time.Second, 1010, errors.New("timeout"))
	want := "recorded 1000 failures (2 failed) across 3 instances in 2s: 500/s, 1.010 statements per failure"
	if got != want {
		t.Errorf("recordSummary with failures recorded = %q; want %q", got, want)
	}
	got = recordSummary(0, 5, 1, time.Second, 50, errors.New("unavailable"))
	want = "recorded none of 5 failures across 1 instances in 1s: every write failed (50 statements sent); first error: unavailable"
	if got != want {
		t.Errorf("recordSummary with none recorded = %q; want %q", got, want)
	}
	got = recordSummary(0, 0, 3, time.Second, 0, nil)
	want = "recorded 0 failures (0 failed) across 3 instances in 1s: 0/s, 0.000 statements per failure"
	if got != want {
		t.Errorf("recordSummary of --count 0 = %q; want %q", got, want)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
