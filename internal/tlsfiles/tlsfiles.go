package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrBadFile is wrapped by every error of this package: a file is missing, unreadable, not PEM of
// the expected kind, or a certificate in it is not valid now.
var ErrBadFile = errors.New("tls")

// Files names the PEM files of one TLS endpoint. Cert and Key go together; CA is the pool that
// verifies the other side (a server's client CA, or a client's server CA).
type Files struct {
	Cert string
	Key  string
	CA   string
}

// Enabled reports whether any file is set.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func (f Files) checkPair() error {
	if (f.Cert == "") != (f.Key == "") {
		return fmt.Errorf("%w: a certificate and its key go together (certificate %q, key %q)", ErrBadFile, f.Cert, f.Key)
	}
	return nil
}

// Server returns the configuration of a listener: its certificate (re-read when the files change)
// and, when CA is set, mutual TLS that requires a client certificate signed by it. now tells the
// time for the validity check (nil: time.Now).
func Server(f Files, now func() time.Time) (*tls.Config, error) {
	return server(f, tls.RequireAndVerifyClientCert, now)
}

// ServerOptionalClient is Server, except that a client certificate is verified if the client
// presents one and not required otherwise (an admin HTTP port that people reach with a bearer
// token and coordinators with their certificate).
func ServerOptionalClient(f Files, now func() time.Time) (*tls.Config, error) {
	return server(f, tls.VerifyClientCertIfGiven, now)
}

func server(f Files, auth tls.ClientAuthType, now func() time.Time) (*tls.Config, error) {
	if now == nil {
		now = time.Now
	}
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%w: a server needs a certificate and a key (certificate %q, key %q)", ErrBadFile, f.Cert, f.Key)
	}
	r := &reloader{files: f, now: now}
	if _, err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return r.current(), nil
	}}
	if f.CA != "" {
		pool, err := Pool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, auth
	}
	return cfg, nil
}

// Client returns the configuration of a dialer: the server is verified against CA (the system
// roots when CA is empty) under serverName (empty: the host dialled), and the certificate, when
// set, is presented for mutual TLS (re-read when its files change).
func Client(f Files, serverName string, now func() time.Time) (*tls.Config, error) {
	if now == nil {
		now = time.Now
	}
	if err := f.checkPair(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if f.CA != "" {
		pool, err := Pool(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		r := &reloader{files: f, now: now}
		if _, err := r.load(); err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.current(), nil }
	}
	return cfg, nil
}

// Pool reads one or more PEM files of CA certificates into one pool (an admin port that verifies
// both workers' and coordinators' certificates takes two); each file must hold at least one.
func Pool(files ...string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for _, file := range files {
		if err := AddPEM(pool, file); err != nil {
			return nil, err
		}
	}
	return pool, nil
}

// AddPEM adds the CA certificates of a PEM file to pool (at least one).
func AddPEM(pool *x509.CertPool, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%w: CA file: %w", ErrBadFile, err)
	}
	n := 0
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fmt.Errorf("%w: CA file %s: %w", ErrBadFile, file, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrBadFile, file)
	}
	return nil
}

// reloadEvery bounds how often the certificate files are looked at.
const reloadEvery = time.Second

// reloader keeps a certificate and re-reads its files when their modification times change.
type reloader struct {
	files Files
	now   func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time
	checked time.Time
}

// load reads both files and checks the leaf's validity period.
func (r *reloader) load() (*tls.Certificate, error) {
	stamp, err := r.stamps()
	if err != nil {
		return nil, err
	}
	c, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s with key %s: %w", ErrBadFile, r.files.Cert, r.files.Key, err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s: %w", ErrBadFile, r.files.Cert, err)
	}
	now := r.now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%w: certificate %s expired at %s", ErrBadFile, r.files.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%w: certificate %s is not valid before %s", ErrBadFile, r.files.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	c.Leaf = leaf
	r.mu.Lock()
	r.cert, r.stamp, r.checked = &c, stamp, now
	r.mu.Unlock()
	return &c, nil
}

func (r *reloader) stamps() ([2]time.Time, error) {
	var out [2]time.Time
	for i, name := range []string{r.files.Cert, r.files.Key} {
		st, err := os.Stat(name)
		if err != nil {
			return out, fmt.Errorf("%w: %w", ErrBadFile, err)
		}
		out[i] = st.ModTime()
	}
	return out, nil
}

// current is the certificate to present: re-read when a file changed since the last look (at most
// once per reloadEvery); the last good one when the new files cannot be loaded.
func (r *reloader) current() *tls.Certificate {
	r.mu.Lock()
	cert, stamp, due := r.cert, r.stamp, r.now().Sub(r.checked) >= reloadEvery
	if due {
		r.checked = r.now()
	}
	r.mu.Unlock()
	if !due {
		return cert
	}
	if now, err := r.stamps(); err != nil || now == stamp {
		return cert
	}
	if c, err := r.load(); err == nil {
		return c
	}
	return cert
}
