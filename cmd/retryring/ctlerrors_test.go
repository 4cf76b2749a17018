package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// startConfiguredCoordinator runs a single-node coordinator on loopback with cfg's auth and TLS
// settings and returns it once it leads.
func startConfiguredCoordinator(t *testing.T, configure func(*coordinator.Config)) *coordinator.Node {
	t.Helper()
	var lns []net.Listener
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, l)
	}
	cfg := coordinator.Config{NodeID: "c1", DataDir: t.TempDir(), NoSync: true, Logger: zerolog.Nop(),
		RaftListener: lns[0], RSocketListener: lns[1], HTTPListener: lns[2]}
	configure(&cfg)
	n, err := coordinator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	return n
}

// ctlWithStderr runs `retryring ctl args...` and returns its output, its stderr and its error.
func ctlWithStderr(args ...string) (string, string, error) {
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"ctl"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// TestCtlArgsSayWhatTheCommandNeeds: a missing or extra argument says, in one line, what the
// command takes and where to find it, for every ctl command.
func TestCtlArgsSayWhatTheCommandNeeds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cordon"}, "ctl cordon WORKER: give WORKER, the worker's id (ctl ring lists them)"},
		{[]string{"uncordon"}, "ctl uncordon WORKER: give WORKER, the worker's id (ctl ring lists them)"},
		{[]string{"cordon", "w1", "w2"}, `ctl cordon WORKER: takes 1 argument, got 2: "w1" "w2"`},
		{[]string{"remove-peer"}, "ctl remove-peer ID: give ID, the coordinator's node id, its --node-id (ctl peers lists them)"},
		{[]string{"add-peer", "c4"}, "ctl add-peer ID RAFTADDR: give RAFTADDR, the node's Raft address, HOST:PORT, as its --raft-addr"},
		{[]string{"pause", "eu/c1/orders"}, `ctl pause takes no arguments, got "eu/c1/orders" (its flags: retryring ctl pause --help)`},
		{[]string{"ring", "x"}, `ctl ring takes no arguments, got "x" (its flags: retryring ctl ring --help)`},
	} {
		_, _, err := ctlWithStderr(tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ctl %s: %v\nwant %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestEveryCommandRefusesStrayArguments: not only ctl: a word where none belongs (a flag typed
// without its dashes, say) is refused in one line, before the command starts anything.
func TestEveryCommandRefusesStrayArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinator", "node-id=c1"}, `coordinator takes no arguments, got "node-id=c1" (its flags: retryring coordinator --help)`},
		{[]string{"worker", "ring"}, `worker takes no arguments, got "ring" (its flags: retryring worker --help)`},
		{[]string{"schema", "apply", "ks"}, `schema apply takes no arguments, got "ks" (its flags: retryring schema apply --help)`},
		{[]string{"token", "new", "w1"}, `token new takes no arguments, got "w1" (its flags: retryring token new --help)`},
		{[]string{"deadletters", "show"}, "deadletters show TRANSACTION_ID: give TRANSACTION_ID, the transaction's id (deadletters list shows them)"},
		{[]string{"deadletters", "show", "t1", "t2"}, `deadletters show TRANSACTION_ID: takes 1 argument, got 2: "t1" "t2"`},
	} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		err := root.ExecuteContext(context.Background())
		if err == nil || err.Error() != tc.want {
			t.Errorf("retryring %s: %v\nwant %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCtlCoordinatorWithoutSchemeTakesHTTPSWithTLSFlags: --coordinator HOST:PORT is https when
// --ca, --cert or --key is given, http otherwise; an explicit http:// with them says what to write.
func TestCtlCoordinatorWithoutSchemeTakesHTTPSWithTLSFlags(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"coordinator_id":"c1","leader_id":"c1"}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	if out, _, err := ctlWithStderr("ring", "--coordinator", host, "--ca", ca); err != nil || !strings.Contains(out, "coordinator c1, leader c1") {
		t.Errorf("ctl ring --coordinator %s --ca: %q %v", host, out, err)
	}
	_, _, err := ctlWithStderr("ring", "--coordinator", "http://"+host, "--ca", ca)
	want := "--ca, --cert and --key are for an https:// coordinator, and --coordinator is http://" + host + ": write https://" + host + " (or leave the scheme out)"
	if err == nil || err.Error() != want {
		t.Errorf("explicit http:// with --ca: %v\nwant %s", err, want)
	}
}

// TestCtlAdminTokenHasItsOwnEnvironmentVariable: ctl reads its admin token from
// RETRYRING_ADMIN_TOKEN_FILE; RETRYRING_TOKEN_FILE (the worker's ring token) still works for ctl,
// with one line on stderr.
func TestCtlAdminTokenHasItsOwnEnvironmentVariable(t *testing.T) {
	const token = "s3cret-admin-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"ring":{"region":"eu","cluster":"c1","service":"orders"},"worker_id":"w1","cordoned":true,"leader_id":"c1"}`))
	}))
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv(adminTokenEnv, tokenFile)
	if out, stderr, err := ctlWithStderr("cordon", "w1", "--coordinator", srv.URL); err != nil || stderr != "" || !strings.Contains(out, "cordoned") {
		t.Errorf("with %s: %q %q %v", adminTokenEnv, out, stderr, err)
	}
	if err := os.Unsetenv(adminTokenEnv); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RETRYRING_TOKEN_FILE", tokenFile)
	out, stderr, err := ctlWithStderr("cordon", "w1", "--coordinator", srv.URL)
	want := "retryring: RETRYRING_TOKEN_FILE is deprecated for ctl cordon --token-file: set RETRYRING_ADMIN_TOKEN_FILE instead\n"
	if err != nil || stderr != want || !strings.Contains(out, "cordoned") {
		t.Errorf("with RETRYRING_TOKEN_FILE: %q %v; stderr %q, want %q", out, err, stderr, want)
	}
}

// TestCtl401SaysWhatTheClientMustDo: a coordinator with an admin token file refuses a change
// without the token, or with a wrong one; ctl's line says what to pass, and nothing of the
// coordinator's own flags.
func TestCtl401SaysWhatTheClientMustDo(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const token = "admin-token-00000000000000001"
	n := startConfiguredCoordinator(t, func(c *coordinator.Config) {
		c.AdminTokenFile = write("admins.yaml", auth.EntryLine("", token, "")+"\n")
		c.ClusterSecretFile = write("secret", "cluster-secret-000000000000001\n")
	})
	addr := "http://" + n.HTTPAddr()
	wrong := write("wrong", "not-the-admin-token-000000000\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cordon", "w1", "--coordinator", addr},
			"coordinator answered 401 Unauthorized: unauthorized: this call needs an admin token (Authorization: Bearer <token>): pass --token-file FILE (or set RETRYRING_ADMIN_TOKEN_FILE) with an admin token"},
		{[]string{"cordon", "w1", "--coordinator", addr, "--token-file", wrong},
			"coordinator answered 401 Unauthorized: unauthorized: the admin token was refused (mistyped, revoked, or not an admin token): check the admin token in --token-file " + wrong},
	} {
		_, _, err := ctlWithStderr(tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ctl %s: %v\nwant %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestCtlSaysItsClientCertificateWasRefused: an https coordinator that verifies client
// certificates refuses one of another CA; ctl says the coordinator refused the certificate of
// --cert, and why. (An expired --cert never leaves: tlsfiles refuses it when ctl starts.)
func TestCtlSaysItsClientCertificateWasRefused(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := tlstest.NewCA("server-ca"), tlstest.NewCA("client-ca"), tlstest.NewCA("other-ca")
	serverCert, serverKey := serverCA.Issue(tlstest.Options{}).Write(dir, "server")
	n := startConfiguredCoordinator(t, func(c *coordinator.Config) {
		c.TLS.Server = tlsfiles.Files{Cert: serverCert, Key: serverKey, CA: clientCA.WriteCA(dir, "client-ca.crt")}
	})
	ca := serverCA.WriteCA(dir, "server-ca.crt")
	addr := "https://" + n.HTTPAddr()
	for name, leaf := range map[string]struct {
		cert *tlstest.Leaf
		want string
	}{
		"good":    {clientCA.Issue(tlstest.Options{}), ""},
		"foreign": {otherCA.Issue(tlstest.Options{}), "it does not trust the CA that signed the certificate; give --cert and --key a certificate of the CA it trusts for clients (remote error: tls: unknown certificate authority)"},
	} {
		cert, key := leaf.cert.Write(dir, name)
		_, _, err := ctlWithStderr("status", "--coordinator", addr, "--ca", ca, "--cert", cert, "--key", key)
		switch {
		case leaf.want == "" && err != nil:
			t.Errorf("%s certificate: %v", name, err)
		case leaf.want != "" && (err == nil || !strings.Contains(err.Error(), "coordinator at "+addr+" refused the client certificate of --cert "+cert+": "+leaf.want)):
			t.Errorf("%s certificate: %v\nwant the coordinator refused the client certificate of --cert %s: %s", name, err, cert, leaf.want)
		}
	}
}
