package cassandratest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// Where StartSecure runs its node: beside the shared one (127.0.0.1:9042, storage 7000, JMX 7199),
// on another loopback address and other ports, so that neither can take the other's.
const (
	// SecureListen is the node's listen and RPC address.
	SecureListen = "127.0.0.2"
	// SecurePort is its native transport port.
	SecurePort = "9142"
	// SecureAddr is SecureListen:SecurePort.
	SecureAddr        = SecureListen + ":" + SecurePort
	secureStoragePort = "7100"
	secureJMXPort     = "7299"
	// SecureServerName is a DNS name of the node's certificate (its IP is in it too).
	SecureServerName = "cassandra.retryring.test"
	// secureHeap keeps the second JVM small: the shared node already takes 1 GiB of a small machine.
	secureHeap = "512M"
)

// SecureNode is a second, single-node Cassandra with client encryption (optional: false,
// require_client_auth: true) and PasswordAuthenticator with CassandraAuthorizer, started by
// scripts/cassandra.sh with certificates made for this test. Its default superuser is
// cassandra/cassandra; tests log in as roles of their own (CreateRole).
type SecureNode struct {
	// Addr is the native transport, SecureAddr.
	Addr string
	// CA signed the node's certificate and the client certificate; the node trusts client
	// certificates that it signed.
	CA *tlstest.CA
	// CAFile, CertFile and KeyFile are the CA and a client certificate with its key, in Dir.
	CAFile, CertFile, KeyFile string
	// Dir holds the certificates and the password files; removed when the test ends.
	Dir string
}

// StartSecure starts the node and stops it when the test ends. It fails the test (never skips)
// when the node does not start. The lib dir of the shared node is reused ($CASSANDRA_LIB_DIR,
// else <shared home>/lib), so that nothing is downloaded twice; the data dir is fresh each time.
//
// Environment: CASSANDRA_TLS_HOME_DIR is the node's home (default <module root>/.cassandra-tls).
func StartSecure(t testing.TB) *SecureNode {
	t.Helper()
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatalf("cassandratest: %v", err)
	}
	dir := t.TempDir()
	n := &SecureNode{Addr: SecureAddr, CA: tlstest.NewCA("retryring test Cassandra CA"), Dir: dir}
	n.CAFile = n.CA.WriteCA(dir, "ca.pem")
	nodeCert, nodeKey := n.CA.Issue(tlstest.Options{CommonName: "cassandra", DNS: []string{SecureServerName},
		IPs: []net.IP{net.ParseIP(SecureListen)}}).Write(dir, "node")
	n.CertFile, n.KeyFile = n.CA.Issue(tlstest.Options{CommonName: "retryring-client"}).Write(dir, "client")

	home := os.Getenv("CASSANDRA_TLS_HOME_DIR")
	if home == "" {
		home = filepath.Join(root, ".cassandra-tls")
	}
	lib := os.Getenv("CASSANDRA_LIB_DIR")
	if lib == "" {
		lib = filepath.Join(homeDir(), "lib")
	}
	script := filepath.Join(root, "scripts", "cassandra.sh")
	env := append(os.Environ(),
		"CASSANDRA_HOME_DIR="+home, "CASSANDRA_LIB_DIR="+lib,
		"CASSANDRA_LISTEN_ADDRESS="+SecureListen, "CASSANDRA_PORT="+SecurePort,
		"CASSANDRA_STORAGE_PORT="+secureStoragePort, "CASSANDRA_JMX_PORT="+secureJMXPort,
		"CASSANDRA_HEAP="+secureHeap, "CASSANDRA_CLUSTER_NAME=retryring-tls",
		"CASSANDRA_TLS_CERT="+nodeCert, "CASSANDRA_TLS_KEY="+nodeKey, "CASSANDRA_TLS_CA="+n.CAFile,
		"CASSANDRA_TLS_CLIENT_AUTH=true", "CASSANDRA_AUTH=password", "CASSANDRA_SUPERUSER_PASSWORD=cassandra",
	)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	// A node left by an earlier run (killed before its cleanup) has other certificates.
	if out, err := run("stop"); err != nil {
		t.Fatalf("cassandratest: %s stop: %v\n%s", script, err, out)
	}
	if err := os.RemoveAll(filepath.Join(home, "data")); err != nil {
		t.Fatalf("cassandratest: %v", err)
	}
	t.Cleanup(func() {
		if out, err := run("stop"); err != nil {
			t.Errorf("cassandratest: %s stop: %v\n%s", script, err, out)
		}
	})
	out, err := run("start")
	if err != nil {
		t.Fatalf("cassandratest: the Cassandra with client encryption and PasswordAuthenticator did not start "+
			"(%s start, home %s): %v\n%s", script, home, err, out)
	}
	t.Logf("cassandratest: %s", out[strings.LastIndexByte(out, '\n')+1:])
	return n
}

// Cluster is a gocql configuration for the node with the client certificate, host verification
// on, and the given login.
func (n *SecureNode) Cluster(t testing.TB, username, password string) *gocql.ClusterConfig {
	t.Helper()
	tc, err := tlsfiles.Client(tlsfiles.Files{CA: n.CAFile, Cert: n.CertFile, Key: n.KeyFile}, SecureServerName, nil)
	if err != nil {
		t.Fatalf("cassandratest: %v", err)
	}
	host, port := splitAddr(n.Addr)
	c := gocql.NewCluster(host)
	c.Port = port
	c.ProtoVersion = 4
	c.Consistency = gocql.One
	c.ConnectTimeout = 10 * time.Second
	c.Timeout = 20 * time.Second
	c.NumConns = 1
	c.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: true}
	c.Authenticator = gocql.PasswordAuthenticator{Username: username, Password: password}
	return c
}

// Superuser is a session as the default superuser, closed when the test ends.
func (n *SecureNode) Superuser(t testing.TB) *gocql.Session {
	t.Helper()
	s, err := n.Cluster(t, "cassandra", "cassandra").CreateSession()
	if err != nil {
		t.Fatalf("cassandratest: superuser session on %s: %v", n.Addr, err)
	}
	t.Cleanup(s.Close)
	return s
}

// CreateRole creates a role that may log in, with a random password, runs grants (CQL with
// %ROLE% standing for the role's name) and returns the file holding the password.
func (n *SecureNode) CreateRole(t testing.TB, name string, grants ...string) (passwordFile string) {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	password := hex.EncodeToString(b[:])
	s := n.Superuser(t)
	stmts := append([]string{"CREATE ROLE " + name + " WITH PASSWORD = '" + password + "' AND LOGIN = true"}, grants...)
	for _, q := range stmts {
		q = strings.ReplaceAll(q, "%ROLE%", name)
		if err := s.Query(q).Exec(); err != nil {
			t.Fatalf("cassandratest: %s: %v", q, err)
		}
	}
	passwordFile = filepath.Join(n.Dir, name+".password")
	if err := os.WriteFile(passwordFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return passwordFile
}
