package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/proctest"
	"github.com/retryring/retryring/testkit/tlstest"
)

// TestCassandraTLSAndPasswordAuth runs the binary against a real Cassandra with client encryption
// (optional: false, client certificates required) and PasswordAuthenticator with
// CassandraAuthorizer: an admin role applies the schema, a service role that may only SELECT and
// MODIFY the keyspace records failures and a worker drains them; then each wrong setting fails
// with one line on stderr naming what is wrong, except under a worker, which stays up and says it
// on /readyz.
func TestCassandraTLSAndPasswordAuth(t *testing.T) {
	requireBinary(t, "coordinator", "worker", "record", "schema", "deadletters")
	const failures = 300
	node := cassandratest.StartSecure(t)
	ks := keyspaceName(t.Name())
	g := proctest.NewGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	tlsArgs := []string{"--cassandra", node.Addr, "--cassandra-ca", node.CAFile, "--cassandra-cert", node.CertFile,
		"--cassandra-key", node.KeyFile, "--cassandra-server-name", cassandratest.SecureServerName}
	ring := proc.DefaultRing
	ringArgs := []string{"--keyspace", ks, "--region", ring.Region, "--cluster", ring.Cluster, "--service", ring.Service, "--window-minutes", "1"}

	adminPassword := node.CreateRole(t, "retryring_admin", "GRANT CREATE ON ALL KEYSPACES TO %ROLE%")
	adminArgs := append(append([]string{}, tlsArgs...), "--cassandra-username", "retryring_admin", "--cassandra-password-file", adminPassword)
	out, err := g.Run(ctx, proc.Spec{Name: "schema", Path: binary, Args: append([]string{"schema", "apply", "--keyspace", ks}, adminArgs...)})
	if err != nil {
		t.Fatalf("schema apply over TLS as retryring_admin: %v\n%s", err, out)
	}

	servicePassword := node.CreateRole(t, "retryring_service",
		"GRANT SELECT ON KEYSPACE "+ks+" TO %ROLE%", "GRANT MODIFY ON KEYSPACE "+ks+" TO %ROLE%")
	serviceArgs := append(append([]string{}, tlsArgs...), "--cassandra-username", "retryring_service")
	password, err := os.ReadFile(servicePassword)
	if err != nil {
		t.Fatal(err)
	}
	// record takes the password from the environment, the worker from its file.
	recordArgs := append(append([]string{"record"}, ringArgs...), serviceArgs...)
	recordArgs = append(recordArgs, "--count", strconv.Itoa(failures), "--instances", "3", "--tx-prefix", "tls-", "--backdate", backdate.String())
	out, err = g.Run(ctx, proc.Spec{Name: "record", Path: binary, Args: recordArgs,
		Env: []string{"RETRYRING_CASSANDRA_PASSWORD=" + strings.TrimSpace(string(password))}})
	if err != nil {
		t.Fatalf("record over TLS as retryring_service: %v\n%s", err, out)
	}
	t.Logf("record: %s", lastLine(out))

	c, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: binary, Coordinators: 1, Workers: 1, Cassandra: node.Addr, Keyspace: ks, SkipSchema: true,
		Ring: ring, Concurrency: 8, LogLevel: os.Getenv("E2E_LOG_LEVEL"),
		WorkerArgs: append(append([]string{}, tlsArgs[2:]...), "--cassandra-username", "retryring_service", "--cassandra-password-file", servicePassword),
	})
	if err != nil {
		t.Fatalf("cluster with a worker on the TLS Cassandra: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	err = c.Downstream.WaitExecutions(ctx, func([]downstream.Execution) bool { return len(c.Downstream.DoneIDs()) >= failures })
	if err != nil {
		t.Fatalf("the worker executed %d of %d failures: %v", len(c.Downstream.DoneIDs()), failures, err)
	}
	done := c.Downstream.DoneIDs()
	for i := range failures {
		if id := "tls-" + strconv.Itoa(i); !done[id] {
			t.Errorf("%s was not executed", id)
		}
	}
	// The service role may also delete: the worker empties tier 5 once its buckets are done.
	su := node.Superuser(t)
	left := -1
	for deadline := time.Now().Add(2 * time.Minute); left != 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
		left = 0
		it := su.Query("SELECT transaction_id FROM " + ks + ".es_retry_transactions_by_instance LIMIT 1000").Iter()
		var id string
		for it.Scan(&id) {
			left++
		}
		if err := it.Close(); err != nil {
			t.Fatalf("read tier 5: %v", err)
		}
	}
	if left != 0 {
		t.Fatalf("%d failures still in tier 5 after every one was executed", left)
	}
	t.Logf("drained %d failures over TLS and PasswordAuthenticator", len(done))

	t.Run("wrong settings fail with one line", func(t *testing.T) {
		testCassandraTLSErrors(t, node, ks, tlsArgs, servicePassword)
	})
}

// testCassandraTLSErrors runs the binary with one wrong setting at a time and checks that it
// exits non-zero with a single line on stderr that names the problem.
func testCassandraTLSErrors(t *testing.T, node *cassandratest.SecureNode, ks string, tlsArgs []string, password string) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrongPassword := write("wrong.password", "not-the-password\n")
	otherCA := tlstest.NewCA("some other CA")
	otherCAFile := otherCA.WriteCA(dir, "other-ca.pem")
	strangerCert, strangerKey := otherCA.Issue(tlstest.Options{CommonName: "stranger"}).Write(dir, "stranger")
	expiredCert, expiredKey := node.CA.Issue(tlstest.Options{CommonName: "expired",
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}).Write(dir, "expired")

	// with replaces the value of each named flag of tlsArgs (an empty value drops the flag).
	with := func(changes ...string) []string {
		set := map[string]string{}
		for i := 0; i+1 < len(changes); i += 2 {
			set[changes[i]] = changes[i+1]
		}
		var out []string
		for i := 0; i+1 < len(tlsArgs); i += 2 {
			v, changed := set[tlsArgs[i]]
			delete(set, tlsArgs[i])
			switch {
			case !changed:
				out = append(out, tlsArgs[i], tlsArgs[i+1])
			case v != "":
				out = append(out, tlsArgs[i], v)
			}
		}
		for k, v := range set {
			out = append(out, k, v)
		}
		return out
	}
	login := func(passwordFile string) []string {
		return []string{"--cassandra-username", "retryring_service", "--cassandra-password-file", passwordFile}
	}
	schema := []string{"schema", "apply", "--keyspace", ks}
	deadLetters := []string{"deadletters", "list", "--keyspace", ks}
	worker := []string{"worker", "--worker-id", "w-bad", "--coordinators", "127.0.0.1:1", "--keyspace", ks,
		"--executor-url", "http://127.0.0.1:1/execute", "--http-addr", "127.0.0.1:0"}

	cases := []struct {
		name  string
		args  []string
		words []string
	}{
		{"wrong password", cat(schema, with(), login(wrongPassword)),
			[]string{node.Addr, `login as "retryring_service" refused`, "password are incorrect"}},
		{"no login", cat(deadLetters, with()),
			[]string{node.Addr, "requires a login (PasswordAuthenticator)"}},
		{"no TLS against the TLS port", cat(schema, with("--cassandra-ca", "", "--cassandra-cert", "", "--cassandra-key", "", "--cassandra-server-name", ""), login(password)),
			[]string{node.Addr, "probably requires TLS"}},
		{"TLS against a plain port", cat(schema, with("--cassandra", cassandratest.Addr()), login(password)),
			[]string{cassandratest.Addr(), "does not speak TLS on this port"}},
		{"wrong CA", cat(deadLetters, with("--cassandra-ca", otherCAFile), login(password)),
			[]string{node.Addr, "not signed by the CA in " + otherCAFile}},
		{"wrong server name", cat(schema, with("--cassandra-server-name", "cassandra.example"), login(password)),
			[]string{`not for the server name "cassandra.example"`}},
		{"no client certificate", cat(schema, with("--cassandra-cert", "", "--cassandra-key", ""), login(password)),
			[]string{"requires a client certificate"}},
		{"client certificate of another CA", cat(schema, with("--cassandra-cert", strangerCert, "--cassandra-key", strangerKey), login(password)),
			[]string{"refused the TLS handshake", strangerCert}},
		{"expired client certificate", cat(schema, with("--cassandra-cert", expiredCert, "--cassandra-key", expiredKey), login(password)),
			[]string{"certificate " + expiredCert + " expired at"}},
		{"missing password file", cat(schema, with(), login(filepath.Join(dir, "nope"))),
			[]string{"cassandra password file", "no such file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, c.args...)
			cmd.Env = cleanEnv()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("%v: want a non-zero exit, got %v\nstderr: %s", c.args, err, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			if strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one line:\n%s", msg)
			}
			for _, w := range c.words {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q does not say %q", msg, w)
				}
			}
			t.Logf("%s", msg)
		})
	}

	// A worker does not exit on a Cassandra it cannot use: it stays up, not ready, retrying, and
	// says why on /readyz.
	t.Run("worker with a wrong CA", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		httpAddr, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		args := cat(worker, with("--cassandra-ca", otherCAFile), login(password))
		for i := range args {
			if args[i] == "--http-addr" {
				args[i+1] = httpAddr
			}
		}
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = cleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		want := "cassandra TLS failed at " + node.Addr + ": the node's certificate"
		var reason string
		for ctx.Err() == nil && !strings.HasPrefix(reason, want) {
			time.Sleep(200 * time.Millisecond)
			resp, err := http.Get("http://" + httpAddr + "/readyz")
			if err != nil {
				continue // not listening yet
			}
			var body struct{ Reason string }
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("/readyz %d with a wrong CA, want 503", resp.StatusCode)
			}
			reason = body.Reason
		}
		if !strings.HasPrefix(reason, want) || !strings.Contains(reason, "not signed by the CA in "+otherCAFile) {
			t.Fatalf("/readyz reason %q, want it to start %q and name %s", reason, want, otherCAFile)
		}
	})
}

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// cleanEnv is the environment without RETRYRING_* (every flag reads one).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RETRYRING_") {
			out = append(out, kv)
		}
	}
	return out
}
