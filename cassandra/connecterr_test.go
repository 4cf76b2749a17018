package cassandra_test

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// tlsNode is a TLS listener on loopback that completes handshakes and then closes: enough to
// see what a client makes of a node's certificate, which is checked before any CQL is spoken.
func tlsNode(t *testing.T, cert tls.Certificate, clientCAs *tlstest.CA) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs.Pool(), tls.RequireAndVerifyClientCert
	}
	return tlstest.Serve(t, cfg, func(c *tls.Conn) {
		_ = c.Handshake()
		// TLS 1.3 sends a refused client certificate's alert on the first read.
		_, _ = c.Read(make([]byte, 1))
	})
}

// connectErr connects with cfg and returns the error, which must be one line.
func connectErr(t *testing.T, cfg cassandra.Config) error {
	t.Helper()
	cfg.ConnectTimeout = 10 * time.Second
	s, err := cassandra.Connect(ctxT(t), cfg)
	if err == nil {
		s.Close()
		t.Fatalf("connect with %+v succeeded", cfg)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error is not one line: %q", err)
	}
	t.Logf("%v", err)
	return err
}

func wantErr(t *testing.T, err, kind error, words ...string) {
	t.Helper()
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("error %q is not %v", err, kind)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func TestConnectNamesTheNodeCertificateProblem(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("node-ca")
	caFile := ca.WriteCA(dir, "ca.pem")
	other := tlstest.NewCA("other-ca")
	otherFile := other.WriteCA(dir, "other.pem")
	loopback := []net.IP{net.ParseIP("127.0.0.1")}

	expired := ca.Issue(tlstest.Options{CommonName: "old-node", IPs: loopback,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	named := ca.Issue(tlstest.Options{CommonName: "named-node", DNS: []string{"cassandra.internal"}})
	good := ca.Issue(tlstest.Options{CommonName: "node", IPs: loopback})

	t.Run("expired", func(t *testing.T) {
		addr := tlsNode(t, expired.TLS, nil)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: caFile}})
		wantErr(t, err, cassandra.ErrTLS, addr, "CN=old-node", "expired at "+expired.Cert.NotAfter.UTC().Format(time.RFC3339))
	})
	t.Run("unknown CA", func(t *testing.T) {
		addr := tlsNode(t, good.TLS, nil)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: otherFile}})
		wantErr(t, err, cassandra.ErrTLS, "CN=node", "issued by CN=node-ca", "not signed by the CA in "+otherFile)
	})
	t.Run("name dialled not in the certificate", func(t *testing.T) {
		addr := tlsNode(t, named.TLS, nil)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: caFile}})
		wantErr(t, err, cassandra.ErrTLS, "certificate is for cassandra.internal", `not for "127.0.0.1", the address dialled`, "set the server name")
	})
	t.Run("server name not in the certificate", func(t *testing.T) {
		addr := tlsNode(t, good.TLS, nil)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: caFile}, ServerName: "cassandra.internal"})
		wantErr(t, err, cassandra.ErrTLS, "certificate is for 127.0.0.1", `not for the server name "cassandra.internal"`)
	})
	t.Run("client certificate required", func(t *testing.T) {
		addr := tlsNode(t, good.TLS, ca)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: caFile}})
		wantErr(t, err, cassandra.ErrTLS, "requires a client certificate")
	})
	t.Run("client certificate refused", func(t *testing.T) {
		addr := tlsNode(t, good.TLS, ca)
		cert, key := other.Issue(tlstest.Options{CommonName: "stranger"}).Write(dir, "stranger")
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}, TLS: tlsfiles.Files{CA: caFile, Cert: cert, Key: key}})
		wantErr(t, err, cassandra.ErrTLS, "refused the TLS handshake", cert)
	})
	t.Run("plain text to a TLS port", func(t *testing.T) {
		addr := tlsNode(t, good.TLS, nil)
		err := connectErr(t, cassandra.Config{Hosts: []string{addr}})
		wantErr(t, err, cassandra.ErrTLS, "probably requires TLS")
	})
}

func TestConnectRefusesAnExpiredClientCertificateBeforeDialling(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("ca")
	cert, key := ca.Issue(tlstest.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}).Write(dir, "client")
	// Nothing listens on this address: the error must come from the certificate, not a dial.
	err := connectErr(t, cassandra.Config{Hosts: []string{"127.0.0.1:1"}, TLS: tlsfiles.Files{CA: ca.WriteCA(dir, "ca.pem"), Cert: cert, Key: key}})
	wantErr(t, err, tlsfiles.ErrBadFile, "certificate "+cert+" expired at")
}

// TestConnectWithTLSToAPlainNode speaks TLS to the shared Cassandra, whose client encryption is off.
func TestConnectWithTLSToAPlainNode(t *testing.T) {
	dir := t.TempDir()
	err := connectErr(t, cassandra.Config{Hosts: []string{addr()}, TLS: tlsfiles.Files{CA: tlstest.NewCA("ca").WriteCA(dir, "ca.pem")}})
	wantErr(t, err, cassandra.ErrTLS, addr(), "does not speak TLS on this port")
}

func TestConnectErrorOfAnUnreachableNodeIsOneLine(t *testing.T) {
	err := connectErr(t, cassandra.Config{Hosts: []string{"127.0.0.1:1"}})
	if errors.Is(err, cassandra.ErrTLS) || errors.Is(err, cassandra.ErrLogin) {
		t.Errorf("a refused dial is neither a TLS nor a login problem: %v", err)
	}
	wantErr(t, err, nil, "127.0.0.1:1", "connection refused")
}
