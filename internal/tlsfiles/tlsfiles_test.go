package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/testkit/tlstest"
)

// serve accepts one connection on a TLS listener of cfg and echoes one line back.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return tlstest.Serve(t, cfg, func(c *tls.Conn) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err == nil {
			_, _ = c.Write(buf)
		}
	})
}

func roundTrip(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		return err
	}
	buf := make([]byte, 5)
	_, err = io.ReadFull(c, buf)
	return err
}

func TestMutualTLSAdmitsOnlyTheCAsClients(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA("ca"), tlstest.NewCA("other")
	caFile := ca.WriteCA(dir, "ca.crt")
	sCert, sKey := ca.Issue(tlstest.Options{}).Write(dir, "server")
	cCert, cKey := ca.Issue(tlstest.Options{CommonName: "w1"}).Write(dir, "client")
	oCert, oKey := other.Issue(tlstest.Options{}).Write(dir, "stranger")

	srv, err := tlsfiles.Server(tlsfiles.Files{Cert: sCert, Key: sKey, CA: caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)

	good, err := tlsfiles.Client(tlsfiles.Files{CA: caFile, Cert: cCert, Key: cKey}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	good.ServerName = "127.0.0.1"
	if err := roundTrip(addr, good); err != nil {
		t.Fatalf("client of the CA refused: %v", err)
	}
	stranger, _ := tlsfiles.Client(tlsfiles.Files{CA: caFile, Cert: oCert, Key: oKey}, "127.0.0.1", nil)
	if err := roundTrip(addr, stranger); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
	none, _ := tlsfiles.Client(tlsfiles.Files{CA: caFile}, "127.0.0.1", nil)
	if err := roundTrip(addr, none); err == nil {
		t.Fatal("a client without a certificate was accepted by mutual TLS")
	}
	wrongRoot, _ := tlsfiles.Client(tlsfiles.Files{CA: other.WriteCA(dir, "other.crt"), Cert: cCert, Key: cKey}, "127.0.0.1", nil)
	if err := roundTrip(addr, wrongRoot); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
}

func TestBadFilesGiveOneClearError(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("ca")
	expCert, expKey := ca.Issue(tlstest.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}).Write(dir, "expired")
	sCert, sKey := ca.Issue(tlstest.Options{}).Write(dir, "server")
	_, otherKey := ca.Issue(tlstest.Options{}).Write(dir, "other")
	garbage := dir + "/garbage.pem"
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		files tlsfiles.Files
		want  string
	}{
		"expired":        {tlsfiles.Files{Cert: expCert, Key: expKey}, "expired at"},
		"missing":        {tlsfiles.Files{Cert: dir + "/nope.crt", Key: sKey}, "nope.crt"},
		"key of another": {tlsfiles.Files{Cert: sCert, Key: otherKey}, "private key does not match"},
		"garbage CA":     {tlsfiles.Files{Cert: sCert, Key: sKey, CA: garbage}, "holds no PEM certificate"},
		"key alone":      {tlsfiles.Files{Key: sKey}, "needs a certificate and a key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tlsfiles.Server(tc.files, nil)
			if !errors.Is(err, tlsfiles.ErrBadFile) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line wrapping ErrBadFile and saying %q", err, tc.want)
			}
		})
	}
}

func TestServerPicksUpARotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("ca")
	caFile := ca.WriteCA(dir, "ca.crt")
	first := ca.Issue(tlstest.Options{CommonName: "first"})
	sCert, sKey := first.Write(dir, "server")
	var clock atomic.Int64 // the handshakes read it on the listener's goroutines
	clock.Store(time.Now().UnixNano())
	srv, err := tlsfiles.Server(tlsfiles.Files{Cert: sCert, Key: sKey}, func() time.Time { return time.Unix(0, clock.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, srv)
	seen := func() string {
		cfg, _ := tlsfiles.Client(tlsfiles.Files{CA: caFile}, "127.0.0.1", nil)
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := seen(); got != "first" {
		t.Fatalf("server presented %q", got)
	}
	second := ca.Issue(tlstest.Options{CommonName: "second"})
	second.Write(dir, "server")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(sCert, future, future); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(2 * time.Second))
	if got := seen(); got != "second" {
		t.Fatalf("after rotation the server presented %q, want the new certificate", got)
	}
}
