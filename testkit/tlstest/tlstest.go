package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

// NewCA makes a self-signed CA valid from an hour ago for ten years.
func NewCA(name string) *CA {
	key := newKey()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	cert := must(x509.ParseCertificate(der))
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Options describe a leaf certificate. The zero value is a server and client certificate for
// 127.0.0.1 and localhost, valid from an hour ago for a year.
type Options struct {
	CommonName string
	DNS        []string
	IPs        []net.IP
	// URIs are URI SANs, e.g. a worker-id binding.
	URIs []string
	// NotBefore and NotAfter override the validity period (an expired certificate: NotAfter in
	// the past).
	NotBefore, NotAfter time.Time
}

// Leaf is an issued certificate with its key.
type Leaf struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
	// TLS is the pair as crypto/tls uses it.
	TLS tls.Certificate
}

// Issue signs a leaf certificate usable by servers and clients.
func (ca *CA) Issue(o Options) *Leaf {
	if o.CommonName == "" {
		o.CommonName = "retryring-test"
	}
	if o.DNS == nil && o.IPs == nil && o.URIs == nil {
		o.DNS, o.IPs = []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	var uris []*url.URL
	for _, s := range o.URIs {
		uris = append(uris, must(url.Parse(s)))
	}
	key := newKey()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: o.CommonName},
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     o.DNS,
		IPAddresses:  o.IPs,
		URIs:         uris,
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key))
	keyDER := must(x509.MarshalPKCS8PrivateKey(key))
	l := &Leaf{
		Cert:    must(x509.ParseCertificate(der)),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	l.TLS = must(tls.X509KeyPair(l.CertPEM, l.KeyPEM))
	return l
}

// WriteCA writes the CA certificate to dir/name and returns the path.
func (ca *CA) WriteCA(dir, name string) string {
	p := filepath.Join(dir, name)
	mustDo(os.WriteFile(p, ca.PEM, 0o600))
	return p
}

// Write writes the certificate and key to dir/name.crt and dir/name.key and returns both paths.
func (l *Leaf) Write(dir, name string) (certFile, keyFile string) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	mustDo(os.WriteFile(certFile, l.CertPEM, 0o600))
	mustDo(os.WriteFile(keyFile, l.KeyPEM, 0o600))
	return certFile, keyFile
}

func newKey() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) }

func serial() *big.Int { return must(rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))) }

func must[T any](v T, err error) T {
	mustDo(err)
	return v
}

func mustDo(err error) {
	if err != nil {
		panic("tlstest: " + err.Error())
	}
}

// Serve listens on loopback with TLS config cfg until the test ends and runs handle on each
// accepted connection in its own goroutine, closing the connection after it (handle runs under
// a 10 s deadline on the connection, so no test hangs on a client that never speaks). It returns
// the listener's address.
func Serve(t testing.TB, cfg *tls.Config, handle func(c *tls.Conn)) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				handle(c.(*tls.Conn))
			}()
		}
	}()
	return ln.Addr().String()
}
