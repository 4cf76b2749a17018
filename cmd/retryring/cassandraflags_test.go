package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
)

func TestCassandraPasswordFromFileOrEnvironment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noEnv := func(string) (string, bool) { return "", false }
	env := func(k string) (string, bool) { return "from-env", k == cassandraPasswordEnv }

	for file, want := range map[string]string{
		write("plain", "s3cret"):       "s3cret",
		write("newline", "s3cret\n"):   "s3cret",
		write("crlf", "s3cret\r\n"):    "s3cret",
		write("spaces", " s3 cret \n"): " s3 cret ", // a password may hold spaces: only the line end goes
	} {
		got, err := cassandraPassword(file, noEnv)
		if err != nil || got != want {
			t.Errorf("cassandraPassword(%s) = %q, %v; want %q", filepath.Base(file), got, err, want)
		}
	}
	if got, err := cassandraPassword("", env); err != nil || got != "from-env" {
		t.Errorf("from the environment: %q, %v", got, err)
	}
	if got, err := cassandraPassword("", noEnv); err != nil || got != "" {
		t.Errorf("no password at all: %q, %v", got, err)
	}
	for name, c := range map[string]struct {
		file  string
		env   func(string) (string, bool)
		words string
	}{
		"both":    {write("both", "x"), env, "given twice"},
		"empty":   {write("empty", "\n"), noEnv, "is empty"},
		"missing": {filepath.Join(dir, "nope"), noEnv, "cassandra password file: open " + filepath.Join(dir, "nope")},
	} {
		_, err := cassandraPassword(c.file, c.env)
		if err == nil || !strings.Contains(err.Error(), c.words) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line saying %q", name, err, c.words)
		}
	}
}

// TestEveryCassandraCommandTakesTLSAndLoginFlags walks the command tree: whatever takes
// --cassandra also takes the TLS and login flags, and none takes a password on the command line.
func TestEveryCassandraCommandTakesTLSAndLoginFlags(t *testing.T) {
	want := []string{"cassandra-ca", "cassandra-cert", "cassandra-key", "cassandra-server-name",
		"cassandra-username", "cassandra-password-file"}
	var walk func(c *cobra.Command)
	found := 0
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("cassandra-password") != nil {
			t.Errorf("%s takes the Cassandra password on the command line", c.CommandPath())
		}
		if c.Flags().Lookup("cassandra") != nil && c.Name() != "demo" {
			found++
			for _, f := range want {
				if c.Flags().Lookup(f) == nil {
					t.Errorf("%s has --cassandra but no --%s", c.CommandPath(), f)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	if found < 5 { // worker, record, schema print and apply, deadletters ...
		t.Fatalf("only %d commands take --cassandra", found)
	}
}

func TestCassandraFlagsMakeTheConfig(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(cassandraPasswordEnv, "")
	os.Unsetenv(cassandraPasswordEnv)
	cmd := &cobra.Command{Use: "x"}
	var cf cassandraFlags
	cf.register(cmd.Flags())
	err := cmd.Flags().Parse([]string{"--cassandra", "10.0.0.1:9142,10.0.0.2:9142", "--cassandra-ca", "ca.pem",
		"--cassandra-cert", "c.crt", "--cassandra-key", "c.key", "--cassandra-server-name", "cassandra.internal",
		"--cassandra-username", "retryring", "--cassandra-password-file", pw})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.config()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Hosts) != 2 || cfg.TLS.CA != "ca.pem" || cfg.TLS.Cert != "c.crt" || cfg.TLS.Key != "c.key" ||
		cfg.ServerName != "cassandra.internal" || cfg.Username != "retryring" || cfg.Password != "s3cret" || !cfg.TLSEnabled() {
		t.Fatalf("config: %+v", cfg)
	}
}

// TestWeakConsistencyRefusedAtStart: worker, record and deadletters refuse a consistency below a
// quorum before they connect, saying why; --allow-weak-consistency lets them go on (to a
// connection error here: nothing listens on port 1; the worker waits for Cassandra instead, and
// says so on /readyz).
func TestWeakConsistencyRefusedAtStart(t *testing.T) {
	for _, args := range [][]string{
		{"worker", "--http-addr", ""},
		{"record", "--count", "1"},
		{"deadletters", "list"},
	} {
		run := func(extra ...string) error {
			cmd := newRootCommand()
			cmd.SetArgs(append(append(args, "--cassandra", "127.0.0.1:1", "--cassandra-timeout", "200ms", "--consistency", "LOCAL_ONE"), extra...))
			return cmd.Execute()
		}
		err := run()
		if !errors.Is(err, cassandra.ErrWeakConsistency) || !strings.Contains(err.Error(), "COMMITTED marker") {
			t.Errorf("%s --consistency LOCAL_ONE: %v; want ErrWeakConsistency with its reason", args[0], err)
		}
		if args[0] == "worker" {
			continue
		}
		if err := run("--allow-weak-consistency"); err == nil || errors.Is(err, cassandra.ErrWeakConsistency) {
			t.Errorf("%s --consistency LOCAL_ONE --allow-weak-consistency: %v; want it past the check", args[0], err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := startWorker(t, "w-weak", "--cassandra", "127.0.0.1:1", "--consistency", "LOCAL_ONE", "--allow-weak-consistency")
	w.readyz(ctx, "503 past the consistency check, waiting for Cassandra", func(code int, reason string) bool {
		return code == http.StatusServiceUnavailable && strings.HasPrefix(reason, "cassandra unreachable: connect to 127.0.0.1:1")
	})
}
