package cassandratest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// DefaultAddr is where scripts/cassandra.sh starts Cassandra by default.
const DefaultAddr = "127.0.0.1:9042"

// Addr is the host:port of the test Cassandra: $RETRYRING_CASSANDRA, or DefaultAddr.
func Addr() string {
	if a := strings.TrimSpace(os.Getenv("RETRYRING_CASSANDRA")); a != "" {
		return a
	}
	return DefaultAddr
}

// Cluster returns a gocql cluster config for Addr, with timeouts generous enough for a
// 2-core machine. Callers may change it (Keyspace, Consistency, ...) before CreateSession.
func Cluster() *gocql.ClusterConfig {
	host, port := splitAddr(Addr())
	c := gocql.NewCluster(host)
	c.Port = port
	c.ProtoVersion = 4 // gocql v1.7.0 speaks at most v4; skips the version probe
	// The product refuses levels below a quorum; QUORUM of a keyspace of factor 1 is one replica.
	c.Consistency = gocql.Quorum
	c.ConnectTimeout = 5 * time.Second
	c.Timeout = 20 * time.Second // schema changes on a loaded 2-core machine take seconds
	c.NumConns = 1
	c.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 3, Interval: time.Second}
	return c
}

func splitAddr(addr string) (string, int) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 9042
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return host, 9042
	}
	return host, port
}

// Session connects to the test Cassandra and closes the session when the test ends.
// It fails the test (never skips it) when Cassandra does not answer.
func Session(t testing.TB) *gocql.Session {
	t.Helper()
	s, err := Cluster().CreateSession()
	if err != nil {
		t.Fatalf("Cassandra not reachable at %s: %v: run `make cassandra-start` (or set RETRYRING_CASSANDRA)", Addr(), err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewKeyspace creates a keyspace with a unique name (SimpleStrategy, replication factor 1)
// and drops it when the test ends. Qualify table names with it ("ks.table"), or set
// Cluster().Keyspace to it for a session of your own.
func NewKeyspace(t testing.TB) string {
	t.Helper()
	s := Session(t)
	ks := keyspaceName(t.Name())
	q := "CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
	if err := s.Query(q).Exec(); err != nil {
		t.Fatalf("cassandratest: %s: %v", q, err)
	}
	// Registered after Session's Close, so it runs first (cleanups run last-in first-out).
	t.Cleanup(func() {
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			t.Errorf("cassandratest: drop keyspace %s: %v", ks, err)
		}
	})
	return ks
}

// keyspaceName turns a test name into a valid, unique keyspace name: at most 48 characters
// of [a-z0-9_], starting with a letter.
func keyspaceName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 28 {
		base = base[:28]
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	return "t_" + base + "_" + hex.EncodeToString(rnd[:]) // 2+28+1+16 = 47 <= 48
}

// LogPath is the Cassandra system log (INFO and above), which also holds the
// "Read N live rows and M tombstone cells ... (see tombstone_warn_threshold)" warnings.
// $RETRYRING_CASSANDRA_LOG, else $CASSANDRA_HOME_DIR/log/system.log, else
// <module root>/.cassandra/log/system.log.
func LogPath() string {
	if p := os.Getenv("RETRYRING_CASSANDRA_LOG"); p != "" {
		return p
	}
	return filepath.Join(homeDir(), "log", "system.log")
}

// TombstoneLogPath is a file holding only the WARN lines of org.apache.cassandra.db.ReadCommand:
// the tombstone_warn_threshold warnings (and tombstone_failure_threshold aborts).
func TombstoneLogPath() string {
	return filepath.Join(filepath.Dir(LogPath()), "tombstones.log")
}

func homeDir() string {
	if h := os.Getenv("CASSANDRA_HOME_DIR"); h != "" {
		return h
	}
	dir, err := os.Getwd()
	if err != nil {
		return ".cassandra"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".cassandra")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, ".cassandra")
		}
	}
}
