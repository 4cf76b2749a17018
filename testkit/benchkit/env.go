package benchkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
)

// Flags are the options every benchmark program takes.
type Flags struct {
	// Addr is the Cassandra contact point, host:port.
	Addr string
	// Keep leaves the benchmark's keyspaces in place for inspection instead of dropping them.
	Keep bool
}

// Register adds -cassandra and -keep to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	addr := strings.TrimSpace(os.Getenv("RETRYRING_CASSANDRA"))
	if addr == "" {
		addr = "127.0.0.1:9042"
	}
	fs.StringVar(&f.Addr, "cassandra", addr, "Cassandra host:port ($RETRYRING_CASSANDRA)")
	fs.BoolVar(&f.Keep, "keep", false, "keep the benchmark keyspaces instead of dropping them")
}

// Connect opens a session with the project's own settings (cassandra.Connect), with timeouts
// long enough for a shared 2-core machine.
func (f *Flags) Connect(ctx context.Context) (*gocql.Session, error) {
	return cassandra.Connect(ctx, cassandra.Config{
		Hosts:   []string{f.Addr},
		Timeout: 20 * time.Second,
	})
}

// KeyspaceName is a fresh keyspace name: bench_<what>_<random>.
func KeyspaceName(what string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bench_" + what + "_" + hex.EncodeToString(b[:])
}

// NewKeyspace creates a keyspace named bench_<what>_<random> with the retry directory's schema
// (replication factor 1) and returns its name.
func NewKeyspace(ctx context.Context, s *gocql.Session, what string) (string, error) {
	ks := KeyspaceName(what)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1}); err != nil {
		return "", err
	}
	return ks, nil
}

// DropKeyspace drops a keyspace this package created, unless f.Keep.
func (f *Flags) DropKeyspace(s *gocql.Session, ks string) {
	if f.Keep || !strings.HasPrefix(ks, "bench_") {
		fmt.Fprintf(os.Stderr, "keyspace %s kept\n", ks)
		return
	}
	if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
		fmt.Fprintf(os.Stderr, "drop keyspace %s: %v\n", ks, err)
	}
}
