package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/flaglist"
)

// probeTimeout bounds one attempt to reach Cassandra: a node that is up answers in well under
// a second, and the demo should say quickly that none is.
const probeTimeout = 10 * time.Second

// schemaTimeout bounds one DDL statement: creating tables on a busy 2-core node takes seconds.
const schemaTimeout = 30 * time.Second

// scriptRel is where the repository keeps the script that runs a local Cassandra.
const scriptRel = "scripts/cassandra.sh"

// connect opens a session without a keyspace (every statement names its own) with timeouts
// fit for DDL.
func connect(ctx context.Context, hosts []string, timeout time.Duration) (*gocql.Session, error) {
	cfg := cassandra.Config{Hosts: hosts, Timeout: timeout, ConnectTimeout: 5 * time.Second}
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return cassandra.Connect(cctx, cfg)
}

// ensureCassandra returns a session to a Cassandra that answers. When none answers and every
// contact point is on this machine, it starts one with scripts/cassandra.sh (found from the
// working directory or beside the binary) and connects again.
func ensureCassandra(ctx context.Context, cfg Config, out io.Writer) (*gocql.Session, error) {
	hosts := flaglist.Split(cfg.Cassandra)
	s, err := connect(ctx, hosts, schemaTimeout)
	if err == nil {
		return s, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	hint := fmt.Errorf("%w at %s (%w): start one with `make cassandra-start`, or name a running one with --cassandra",
		ErrCassandraUnreachable, cfg.Cassandra, err)
	port, local := loopbackPort(hosts)
	if !local {
		return nil, hint
	}
	script := cfg.CassandraScript
	if script == "" {
		script = findScript(cfg.Binary)
	}
	if script == "" {
		return nil, hint
	}
	fmt.Fprintf(out, "Cassandra is not answering at %s: starting it with %s start\n", cfg.Cassandra, script)
	fmt.Fprintln(out, "(the first start fetches Cassandra's jars with Maven and takes a few minutes)")
	cmd := exec.CommandContext(ctx, script, "start")
	cmd.Dir = filepath.Dir(filepath.Dir(script))
	cmd.Env = append(os.Environ(), "CASSANDRA_PORT="+port)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s start: %w", ErrCassandraUnreachable, script, err)
	}
	s, err = connect(ctx, hosts, schemaTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w at %s after %s start: %w", ErrCassandraUnreachable, cfg.Cassandra, script, err)
	}
	return s, nil
}

// loopbackPort reports whether every contact point is a loopback address, and the port of the
// first (the script starts one node, on that port).
func loopbackPort(hosts []string) (string, bool) {
	port := ""
	for _, h := range hosts {
		host, p, err := net.SplitHostPort(h)
		if err != nil {
			host, p = h, "9042"
		}
		if port == "" {
			port = p
		}
		if host != "localhost" {
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return "", false
			}
		}
	}
	return port, len(hosts) > 0
}

// findScript looks for scripts/cassandra.sh in the working directory and its parents, then
// beside the binary (bin/retryring → ../scripts).
func findScript(binary string) string {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if binary != "" {
		dirs = append(dirs, filepath.Dir(filepath.Dir(binary)))
	}
	for _, d := range dirs {
		p := filepath.Join(d, scriptRel)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// createKeyspace applies the schema to a fresh keyspace. A keyspace of that name that already
// exists is refused: the demo counts everything in it as its own.
func createKeyspace(ctx context.Context, s *gocql.Session, ks string) error {
	var name string
	err := s.Query("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?", ks).
		WithContext(ctx).Scan(&name)
	switch {
	case err == nil:
		return fmt.Errorf("%w: keyspace %s already exists; name another with --keyspace", ErrInvalidConfig, ks)
	case !errors.Is(err, gocql.ErrNotFound):
		return fmt.Errorf("demo: look up keyspace %s: %w", ks, err)
	}
	return cassandra.ApplySchema(ctx, s, ks, cassandra.Replication{Factor: 1})
}

// dropKeyspace drops the demo's keyspace.
func dropKeyspace(ctx context.Context, s *gocql.Session, ks string) error {
	if err := cassandra.ValidateKeyspace(ks); err != nil {
		return err // never build DDL from a name that is not one
	}
	return s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec()
}
