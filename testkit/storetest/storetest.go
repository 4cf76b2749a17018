package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
)

var shared struct {
	once    sync.Once
	session *gocql.Session
	ks      string
	err     error
}

func setup() {
	s, err := cassandratest.Cluster().CreateSession()
	if err != nil {
		shared.err = fmt.Errorf("cassandra not reachable at %s: %w: run `make cassandra-start` (or set RETRYRING_CASSANDRA)", cassandratest.Addr(), err)
		return
	}
	ks := "t_store_" + randHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		shared.err = err
		_ = s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
		s.Close()
		return
	}
	shared.session, shared.ks = s, ks
}

// Main runs the tests and then drops the shared keyspace.
func Main(m *testing.M) {
	code := m.Run()
	if shared.session != nil {
		if err := shared.session.Query("DROP KEYSPACE IF EXISTS " + shared.ks).Exec(); err != nil {
			fmt.Fprintf(os.Stderr, "storetest: drop keyspace %s: %v\n", shared.ks, err)
		}
		shared.session.Close()
	}
	os.Exit(code)
}

// Keyspace returns the shared session and keyspace, creating them on first use.
func Keyspace(t testing.TB) (*gocql.Session, string) {
	t.Helper()
	shared.once.Do(setup)
	if shared.err != nil {
		t.Fatalf("storetest: %v", shared.err)
	}
	return shared.session, shared.ks
}

// Ring is a ring key no other test uses.
func Ring(t testing.TB) lease.RingKey {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return lease.RingKey{Region: "test-" + randHex(4), Cluster: "c1", Service: name}
}

// Store is a Store on the shared keyspace for a ring of its own, with windows of
// windowMinutes and pages of 100 rows (so that paging is exercised by small data).
func Store(t testing.TB, windowMinutes int) *cassandra.Store {
	t.Helper()
	return StoreFor(t, Ring(t), windowMinutes)
}

// StoreFor is Store for a given ring key.
func StoreFor(t testing.TB, ring lease.RingKey, windowMinutes int) *cassandra.Store {
	t.Helper()
	s, ks := Keyspace(t)
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: windowMinutes, PageSize: 100})
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return st
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
