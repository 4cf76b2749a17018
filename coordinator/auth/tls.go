package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// TLS configures a coordinator's TLS. The zero value is plain TCP everywhere, as before TLS
// existed. The files are read when the node is built (NewSetup fails with one line naming a bad
// file) and the certificates again when they change on disk (tlsfiles).
type TLS struct {
	// Server is the certificate and key of the RSocket and admin HTTP listeners. Its CA, when set,
	// is the client CA: the RSocket listener then requires a client certificate signed by it
	// (mutual TLS), and the admin HTTP listener verifies one if the client presents it.
	Server tlsfiles.Files
	// Raft is this coordinator's certificate and key for Raft and for the calls between
	// coordinators' admin ports, and the CA that signs every coordinator's (and nothing else:
	// whoever holds a certificate of it is a coordinator). All three or none.
	Raft tlsfiles.Files
	// RequireWorkerBinding refuses, under mutual TLS, a worker certificate that binds no worker id
	// (see WorkerIDPrefixURI). Without it such a certificate may use any worker id.
	RequireWorkerBinding bool
	// Now tells the time for the certificates' validity checks. Default time.Now.
	Now func() time.Time
}

// WorkerIDPrefixURI starts the URI SAN by which a worker certificate binds the worker ids it may
// use: "urn:retryring:worker-id-prefix:orders-" admits every worker id that starts with "orders-".
// A certificate may carry several; the prefix after the last colon may be empty (any id).
const WorkerIDPrefixURI = "urn:retryring:worker-id-prefix:"

// handshakeTimeout bounds a whole server-side TLS handshake (RSocket and Raft), from the
// connection's first byte: a client that sends nothing, stalls or trickles bytes cannot hold a
// connection longer.
const handshakeTimeout = 3 * time.Second

// Validate checks that the files given go together; the error names the flags.
func (t TLS) Validate() error {
	switch {
	case t.Server.Cert == "" && t.Server.Key == "" && t.Server.CA != "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	case (t.Server.Cert == "") != (t.Server.Key == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.Raft.Enabled() && (t.Raft.Cert == "" || t.Raft.Key == "" || t.Raft.CA == ""):
		return errors.New("Raft TLS needs --raft-tls-cert, --raft-tls-key and --raft-tls-ca together")
	case t.RequireWorkerBinding && t.Server.CA == "":
		return errors.New("requiring worker id bindings needs mutual TLS (--tls-client-ca)")
	}
	return nil
}

// CoordinatorIdentity reports whether the other coordinators can prove who they are on the admin
// port with their Raft certificate: Raft TLS is on and so is the admin port's TLS (a plain admin
// port sees no client certificate at all).
func (t TLS) CoordinatorIdentity() bool { return t.Raft.Enabled() && t.Server.Cert != "" }

// Setup is the TLS configuration built from a TLS; a nil field means plain TCP there.
type Setup struct {
	RSocket        *tls.Config // RSocket listener
	Admin          *tls.Config // admin HTTP listener
	RaftServer     *tls.Config // Raft listener: mutual TLS against the Raft CA
	RaftClient     *tls.Config // Raft dials and calls to other coordinators' admin ports
	RaftPool       *x509.CertPool
	PeerRoots      *x509.CertPool  // verifies the other coordinators' admin certificates
	PeerTransport  *http.Transport // calls to other coordinators' admin ports; nil when plain
	Mutual         bool            // the RSocket listener requires a client certificate
	RequireBinding bool
}

// NewSetup reads the files of t; its error says which part (Raft TLS, RSocket and admin TLS,
// admin TLS) and which file.
func NewSetup(t TLS) (*Setup, error) {
	s := &Setup{RequireBinding: t.RequireWorkerBinding}
	if t.Raft.Enabled() {
		var err error
		if s.RaftServer, err = tlsfiles.Server(t.Raft, t.Now); err != nil {
			return nil, fmt.Errorf("Raft TLS: %w", err)
		}
		if s.RaftClient, err = tlsfiles.Client(t.Raft, "", t.Now); err != nil {
			return nil, fmt.Errorf("Raft TLS: %w", err)
		}
		s.RaftPool = s.RaftServer.ClientCAs
		s.PeerRoots = s.RaftPool
	}
	if t.Server.Cert == "" {
		return s, nil
	}
	var err error
	if s.RSocket, err = tlsfiles.Server(t.Server, t.Now); err != nil {
		return nil, fmt.Errorf("RSocket and admin TLS: %w", err)
	}
	s.Mutual = t.Server.CA != ""
	// The admin port verifies a client certificate if one is given, against the client CA and the
	// Raft CA: people come with a bearer token, coordinators with their Raft certificate.
	var cas []string
	for _, f := range []string{t.Server.CA, t.Raft.CA} {
		if f != "" {
			cas = append(cas, f)
		}
	}
	if s.Admin, err = tlsfiles.ServerOptionalClient(tlsfiles.Files{Cert: t.Server.Cert, Key: t.Server.Key}, t.Now); err != nil {
		return nil, fmt.Errorf("admin TLS: %w", err)
	}
	if len(cas) > 0 {
		if s.Admin.ClientCAs, err = tlsfiles.Pool(cas...); err != nil {
			return nil, fmt.Errorf("admin TLS: %w", err)
		}
		s.Admin.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if s.PeerRoots == nil {
		// Without Raft TLS the coordinators' admin certificates are checked against the system
		// roots and the client CA (a private CA then signs both).
		if s.PeerRoots, err = x509.SystemCertPool(); err != nil || s.PeerRoots == nil {
			s.PeerRoots = x509.NewCertPool()
		}
		if t.Server.CA != "" {
			if err := tlsfiles.AddPEM(s.PeerRoots, t.Server.CA); err != nil {
				return nil, fmt.Errorf("admin TLS: %w", err)
			}
		}
	}
	s.PeerTransport = NewPeerTransport(s.PeerRoots, s.RaftClient)
	return s, nil
}

// ---- The server side of a TLS connection, on the RSocket and the Raft listener.

// ServerConn is an accepted connection whose TLS handshake runs on the first Read or Write,
// on the goroutine that serves the connection (rsocket-go and raft accept in one loop: a
// handshake there would let one slow client stall every other), bounded as a whole by
// handshakeTimeout.
//
// A client that does not start with a TLS record is not a TLS client. If plain is set it is
// called with the first byte read, to answer in the plain protocol (see AnswerPlainRSocket); the
// connection is closed either way.
type ServerConn struct {
	raw   net.Conn
	cfg   *tls.Config
	plain func(raw net.Conn, first byte)
	// failed, if set, is told why a handshake failed.
	failed func(remote net.Addr, err error)
	// slots, if set, bounds the handshakes under way at once (see MaxConcurrentHandshakes).
	slots chan struct{}

	once sync.Once
	err  error
	mu   sync.Mutex
	tls  *tls.Conn // set once the handshake succeeded
}

// NewServerConn wraps an accepted connection whose handshake runs on its first Read or Write.
// plain, if set, answers a client that did not start TLS (AnswerPlainRSocket); failed, if set, is
// told why a handshake failed; slots, if set, bounds the handshakes under way at once.
func NewServerConn(raw net.Conn, cfg *tls.Config, plain func(raw net.Conn, first byte), failed func(remote net.Addr, err error), slots chan struct{}) *ServerConn {
	return &ServerConn{raw: raw, cfg: cfg, plain: plain, failed: failed, slots: slots}
}

// MaxConcurrentHandshakes bounds the TLS handshakes a coordinator runs at once on its RSocket
// port. A handshake costs about half a millisecond of CPU on each side; after a failover every
// worker reconnects at once (twice, when it lands on a follower first), and with a few hundred
// handshakes runnable together the Go scheduler queued the new leader's Raft heartbeats behind
// them, past the leader lease: it stepped down, and the election that followed cost workers their
// leases. Bounded, the handshakes queue instead of the heartbeats. A slot is held while the
// handshake waits for the client too, hence well above the core count.
const MaxConcurrentHandshakes = 32

// tlsRecordHandshake is the first byte of every TLS ClientHello.
const tlsRecordHandshake = 0x16

func (c *ServerConn) handshake() error {
	c.once.Do(func() {
		c.err = c.doHandshake()
		if c.err != nil {
			// Told before the close: the close of a connection whose failure has its line
			// logs nothing more (limits.explain).
			if c.failed != nil {
				c.failed(c.raw.RemoteAddr(), c.err)
			}
			_ = c.raw.Close()
		}
	})
	return c.err
}

func (c *ServerConn) doHandshake() error {
	// One bound for everything before the handshake is done, the plain answer included: a client
	// that trickles bytes cannot stretch it. On the RSocket port the reads wait for it rather than
	// the silence timeout (the coordinator's silenceConn implements SetHandshakeDeadline).
	expired := make(chan struct{})
	timer := time.AfterFunc(handshakeTimeout, func() {
		close(expired)
		_ = c.raw.Close()
	})
	defer timer.Stop()
	if d, ok := c.raw.(interface{ SetHandshakeDeadline(time.Time) }); ok {
		d.SetHandshakeDeadline(time.Now().Add(handshakeTimeout))
		defer d.SetHandshakeDeadline(time.Time{})
	}
	var first [1]byte
	if _, err := io.ReadFull(c.raw, first[:]); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	if first[0] != tlsRecordHandshake {
		if c.plain != nil {
			c.plain(c.raw, first[0])
		}
		return fmt.Errorf("%w: the client did not start a TLS handshake (first byte %#02x)", errPlainClient, first[0])
	}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-expired:
			return fmt.Errorf("TLS handshake: no handshake slot within %v (%d handshakes under way)", handshakeTimeout, cap(c.slots))
		}
	}
	tc := tls.Server(&prefixConn{Conn: c.raw, prefix: first[:]}, c.cfg)
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.mu.Lock()
	c.tls = tc
	c.mu.Unlock()
	return nil
}

// errPlainClient: a client spoke plain TCP to a TLS port.
var errPlainClient = errors.New("plain client on a TLS port")

func (c *ServerConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tls.Read(b)
}

func (c *ServerConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tls.Write(b)
}

// Close closes the connection; it does not send a close_notify (the peers of both protocols
// stop at the end of their own frames and never needed one).
func (c *ServerConn) Close() error                       { return c.raw.Close() }
func (c *ServerConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *ServerConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *ServerConn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *ServerConn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *ServerConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// PeerCertificates are the client's verified certificates (leaf first); nil before the handshake
// or without a client certificate.
func (c *ServerConn) PeerCertificates() []*x509.Certificate {
	c.mu.Lock()
	tc := c.tls
	c.mu.Unlock()
	if tc == nil {
		return nil
	}
	return tc.ConnectionState().PeerCertificates
}

// prefixConn gives back the bytes read to tell TLS from plain before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// Listener wraps a listener's connections in ServerConn (the Raft listener; the RSocket listener
// wraps its own, which it keeps by remote address).
type Listener struct {
	net.Listener
	Config *tls.Config
	// Failed, if set, is told why a handshake failed.
	Failed func(remote net.Addr, err error)
}

func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &ServerConn{raw: c, cfg: l.Config, failed: l.Failed}, nil
}

// AnswerPlainRSocket answers a plain RSocket client on the TLS port with REJECTED_SETUP, so that
// its log says what is wrong instead of "connection closed". RSocket over TCP starts with a 3-byte
// frame length whose first byte is 0 for any SETUP below 64 KiB; anything else is just closed.
// The client's frame is read first: closing with unread data would reset the connection and could
// discard the answer before the client reads it.
func AnswerPlainRSocket(raw net.Conn, first byte) {
	if first != 0 {
		return
	}
	var lenLow [2]byte
	if _, err := io.ReadFull(raw, lenLow[:]); err != nil {
		return
	}
	if _, err := io.CopyN(io.Discard, raw, int64(lenLow[0])<<8|int64(lenLow[1])); err != nil {
		return
	}
	body := []byte(fmt.Sprintf(`{"error":%q,"message":"this coordinator's RSocket port requires TLS: give the worker --coordinator-ca (and --coordinator-cert and --coordinator-key if the coordinator requires client certificates)"}`, lease.CodeBadSetup))
	_, _ = raw.Write(rejectedSetupFrame(body))
	// Wait for the client to close after reading the answer (or the handshake deadline).
	_, _ = io.CopyN(io.Discard, raw, 64<<10)
}

// rejectedSetupFrame is an RSocket ERROR frame on stream 0 with code REJECTED_SETUP, with the
// 3-byte length prefix of RSocket over TCP.
func rejectedSetupFrame(data []byte) []byte {
	const (
		frameTypeError     = 0x0B
		codeRejectedSetup  = 0x00000003
		headerAndCodeBytes = 4 + 2 + 4
	)
	n := headerAndCodeBytes + len(data)
	f := make([]byte, 3+n)
	f[0], f[1], f[2] = byte(n>>16), byte(n>>8), byte(n)
	// Bytes 3..6: stream id 0. Then the frame type in the top 6 bits of 16, no flags.
	f[7], f[8] = frameTypeError<<2, 0
	f[9], f[10], f[11], f[12] = 0, 0, 0, codeRejectedSetup
	copy(f[13:], data)
	return f
}

// CheckWorkerBinding admits a worker certificate for workerID: its URI SANs of WorkerIDPrefixURI
// must hold a prefix of the id; a certificate with none is admitted unless required. The refusal
// is the unauthorized wire error the worker reads.
func CheckWorkerBinding(cert *x509.Certificate, workerID string, required bool) error {
	prefixes := workerIDPrefixes(cert)
	if len(prefixes) == 0 {
		if required {
			return unauthorized(fmt.Sprintf("certificate %q binds no worker id (a URI SAN %s<prefix>), and this coordinator requires one",
				cert.Subject.CommonName, WorkerIDPrefixURI))
		}
		return nil
	}
	for _, p := range prefixes {
		if strings.HasPrefix(workerID, p) {
			return nil
		}
	}
	return unauthorized(fmt.Sprintf("certificate %q binds worker ids starting with %q; worker_id %q is not one of them",
		cert.Subject.CommonName, prefixes, workerID))
}

// workerIDPrefixes reads the worker-id prefixes a certificate binds.
func workerIDPrefixes(cert *x509.Certificate) []string {
	var out []string
	for _, u := range cert.URIs {
		if p, ok := strings.CutPrefix(uriString(u), WorkerIDPrefixURI); ok {
			out = append(out, p)
		}
	}
	return out
}

func uriString(u *url.URL) string {
	if u.Opaque != "" {
		return u.Scheme + ":" + u.Opaque
	}
	return u.String()
}

func unauthorized(msg string) error {
	return &lease.WireError{Code: lease.CodeUnauthorized, Message: msg}
}

// ClientHandshake runs a client TLS handshake on raw under the host name of addr.
func ClientHandshake(ctx context.Context, raw net.Conn, cfg *tls.Config, addr string) (*tls.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w%s", addr, err, handshakeHint(err))
	}
	return tc, nil
}

// handshakeHint names the likely cause of a handshake the other side cut short.
func handshakeHint(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "connection reset") {
		return " (the other side closed the connection: is TLS on there too? A cluster is configured alike on every node)"
	}
	if strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
		return " (the other side answered in plain text: TLS is off there; a cluster is configured alike on every node)"
	}
	return ""
}

// NewPeerTransport is the one transport of every call to other coordinators' admin ports under
// TLS, so that their connections are reused.
func NewPeerTransport(roots *x509.CertPool, raftClient *tls.Config) *http.Transport {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if raftClient != nil {
		cfg.GetClientCertificate = raftClient.GetClientCertificate
	}
	return &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: 5 * time.Second}
}

// LimitedLog logs at most one line per period: a misconfigured peer or a flood of bad clients
// would otherwise log on every attempt.
type LimitedLog struct {
	last       atomic.Int64
	suppressed atomic.Int64
}

const limitedLogPeriod = 10 * time.Second

// Log logs msg and err at warn unless a line went out within limitedLogPeriod; the next line
// says how many were suppressed.
func (l *LimitedLog) Log(log zerolog.Logger, msg string, err error) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(limitedLogPeriod) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	log.Warn().Err(err).Int64("similar_suppressed", l.suppressed.Swap(0)).Msg(msg)
}
