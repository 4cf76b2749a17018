package coordinator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// TLS configures the coordinator's TLS. The zero value is plain TCP everywhere, as before TLS
// existed. The files are read when the node is built (New fails with one line naming a bad file)
// and the certificates again when they change on disk (tlsfiles).
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

// tlsHandshakeTimeout bounds a whole server-side TLS handshake (RSocket and Raft), from the
// connection's first byte: a client that sends nothing, stalls or trickles bytes cannot hold a
// connection longer.
const tlsHandshakeTimeout = 3 * time.Second

func (t TLS) validate() error {
	switch {
	case t.Server.Cert == "" && t.Server.Key == "" && t.Server.CA != "":
		return fmt.Errorf("%w: --tls-client-ca needs --tls-cert and --tls-key", ErrBadConfig)
	case (t.Server.Cert == "") != (t.Server.Key == ""):
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrBadConfig)
	case t.Raft.Enabled() && (t.Raft.Cert == "" || t.Raft.Key == "" || t.Raft.CA == ""):
		return fmt.Errorf("%w: Raft TLS needs --raft-tls-cert, --raft-tls-key and --raft-tls-ca together", ErrBadConfig)
	case t.RequireWorkerBinding && t.Server.CA == "":
		return fmt.Errorf("%w: requiring worker id bindings needs mutual TLS (--tls-client-ca)", ErrBadConfig)
	}
	return nil
}

// coordinatorIdentity reports whether the other coordinators can prove who they are on the admin
// port with their Raft certificate: Raft TLS is on and so is the admin port's TLS (a plain admin
// port sees no client certificate at all).
func (t TLS) coordinatorIdentity() bool { return t.Raft.Enabled() && t.Server.Cert != "" }

// tlsSetup is the TLS configuration built from Config.TLS; a nil field means plain TCP there.
type tlsSetup struct {
	rsocket        *tls.Config // RSocket listener
	admin          *tls.Config // admin HTTP listener
	raftServer     *tls.Config // Raft listener: mutual TLS against the Raft CA
	raftClient     *tls.Config // Raft dials and calls to other coordinators' admin ports
	raftPool       *x509.CertPool
	peerRoots      *x509.CertPool  // verifies the other coordinators' admin certificates
	peerTransport  *http.Transport // calls to other coordinators' admin ports; nil when plain
	mutual         bool            // the RSocket listener requires a client certificate
	requireBinding bool
}

func newTLSSetup(t TLS) (*tlsSetup, error) {
	s := &tlsSetup{requireBinding: t.RequireWorkerBinding}
	if t.Raft.Enabled() {
		var err error
		if s.raftServer, err = tlsfiles.Server(t.Raft, t.Now); err != nil {
			return nil, fmt.Errorf("%w: Raft TLS: %w", ErrBadConfig, err)
		}
		if s.raftClient, err = tlsfiles.Client(t.Raft, "", t.Now); err != nil {
			return nil, fmt.Errorf("%w: Raft TLS: %w", ErrBadConfig, err)
		}
		s.raftPool = s.raftServer.ClientCAs
		s.peerRoots = s.raftPool
	}
	if t.Server.Cert == "" {
		return s, nil
	}
	var err error
	if s.rsocket, err = tlsfiles.Server(t.Server, t.Now); err != nil {
		return nil, fmt.Errorf("%w: RSocket and admin TLS: %w", ErrBadConfig, err)
	}
	s.mutual = t.Server.CA != ""
	// The admin port verifies a client certificate if one is given, against the client CA and the
	// Raft CA: people come with a bearer token, coordinators with their Raft certificate.
	var cas []string
	for _, f := range []string{t.Server.CA, t.Raft.CA} {
		if f != "" {
			cas = append(cas, f)
		}
	}
	if s.admin, err = tlsfiles.ServerOptionalClient(tlsfiles.Files{Cert: t.Server.Cert, Key: t.Server.Key}, t.Now); err != nil {
		return nil, fmt.Errorf("%w: admin TLS: %w", ErrBadConfig, err)
	}
	if len(cas) > 0 {
		if s.admin.ClientCAs, err = tlsfiles.Pool(cas...); err != nil {
			return nil, fmt.Errorf("%w: admin TLS: %w", ErrBadConfig, err)
		}
		s.admin.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if s.peerRoots == nil {
		// Without Raft TLS the coordinators' admin certificates are checked against the system
		// roots and the client CA (a private CA then signs both).
		if s.peerRoots, err = x509.SystemCertPool(); err != nil || s.peerRoots == nil {
			s.peerRoots = x509.NewCertPool()
		}
		if t.Server.CA != "" {
			if err := tlsfiles.AddPEM(s.peerRoots, t.Server.CA); err != nil {
				return nil, fmt.Errorf("%w: admin TLS: %w", ErrBadConfig, err)
			}
		}
	}
	s.peerTransport = newPeerTransport(s.peerRoots, s.raftClient)
	return s, nil
}

// ---- The server side of a TLS connection, on the RSocket and the Raft listener.

// serverTLSConn is an accepted connection whose TLS handshake runs on the first Read or Write,
// on the goroutine that serves the connection (rsocket-go and raft accept in one loop: a
// handshake there would let one slow client stall every other), bounded as a whole by
// tlsHandshakeTimeout.
//
// A client that does not start with a TLS record is not a TLS client. If plain is set it is
// called with the first byte read, to answer in the plain protocol (see answerPlainRSocket); the
// connection is closed either way.
type serverTLSConn struct {
	raw   net.Conn
	cfg   *tls.Config
	plain func(raw net.Conn, first byte)
	// failed, if set, is told why a handshake failed.
	failed func(remote net.Addr, err error)
	// slots, if set, bounds the handshakes under way at once (see maxConcurrentHandshakes).
	slots chan struct{}

	once sync.Once
	err  error
	mu   sync.Mutex
	tls  *tls.Conn // set once the handshake succeeded
}

// maxConcurrentHandshakes bounds the TLS handshakes a coordinator runs at once on its RSocket
// port. A handshake costs about half a millisecond of CPU on each side; after a failover every
// worker reconnects at once (twice, when it lands on a follower first), and with a few hundred
// handshakes runnable together the Go scheduler queued the new leader's Raft heartbeats behind
// them, past the leader lease: it stepped down, and the election that followed cost workers their
// leases. Bounded, the handshakes queue instead of the heartbeats. A slot is held while the
// handshake waits for the client too, hence well above the core count.
const maxConcurrentHandshakes = 32

// tlsRecordHandshake is the first byte of every TLS ClientHello.
const tlsRecordHandshake = 0x16

func (c *serverTLSConn) handshake() error {
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

func (c *serverTLSConn) doHandshake() error {
	// One bound for everything before the handshake is done, the plain answer included: a client
	// that trickles bytes cannot stretch it. On the RSocket port the reads wait for it rather than
	// the silence timeout (silenceConn.handshakeUntil).
	expired := make(chan struct{})
	timer := time.AfterFunc(tlsHandshakeTimeout, func() {
		close(expired)
		_ = c.raw.Close()
	})
	defer timer.Stop()
	if d, ok := c.raw.(interface{ setHandshakeDeadline(time.Time) }); ok {
		d.setHandshakeDeadline(time.Now().Add(tlsHandshakeTimeout))
		defer d.setHandshakeDeadline(time.Time{})
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
			return fmt.Errorf("TLS handshake: no handshake slot within %v (%d handshakes under way)", tlsHandshakeTimeout, cap(c.slots))
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

func (c *serverTLSConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tls.Read(b)
}

func (c *serverTLSConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.tls.Write(b)
}

// Close closes the connection; it does not send a close_notify (the peers of both protocols
// stop at the end of their own frames and never needed one).
func (c *serverTLSConn) Close() error                       { return c.raw.Close() }
func (c *serverTLSConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *serverTLSConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *serverTLSConn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *serverTLSConn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *serverTLSConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// peerCertificates are the client's verified certificates (leaf first); nil before the handshake
// or without a client certificate.
func (c *serverTLSConn) peerCertificates() []*x509.Certificate {
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

// tlsListener wraps a listener's connections in serverTLSConn (the Raft listener; the RSocket
// listener does it in silenceListener, which keeps its connections by remote address).
type tlsListener struct {
	net.Listener
	cfg    *tls.Config
	failed func(remote net.Addr, err error)
}

func (l *tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &serverTLSConn{raw: c, cfg: l.cfg, failed: l.failed}, nil
}

// answerPlainRSocket answers a plain RSocket client on the TLS port with REJECTED_SETUP, so that
// its log says what is wrong instead of "connection closed". RSocket over TCP starts with a 3-byte
// frame length whose first byte is 0 for any SETUP below 64 KiB; anything else is just closed.
// The client's frame is read first: closing with unread data would reset the connection and could
// discard the answer before the client reads it.
func answerPlainRSocket(raw net.Conn, first byte) {
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

// ---- Identity: worker id binding and coordinators on the admin port.

// peerCertificates returns the verified client certificates (leaf first) of the worker connection
// from remote (rsocket.GetAddr of its socket); nil when the RSocket port is plain, the client
// presented none, or the connection is gone.
func (n *Node) peerCertificates(remote string) []*x509.Certificate {
	return n.rsListener.peerCertificates(remote)
}

// checkWorkerCertificate admits a SETUP under mutual TLS only if the worker's certificate binds
// its worker id (a URI SAN of WorkerIDPrefixURI whose prefix starts the id), or binds nothing and
// bindings are not required. Without mutual TLS it admits everything. The refusal is
// unauthorized, before anything about the worker is registered.
func (n *Node) checkWorkerCertificate(sock rsocket.CloseableRSocket, s lease.Setup) error {
	if !n.tls.mutual {
		return nil
	}
	var certs []*x509.Certificate
	if remote, ok := rsocket.GetAddr(sock); ok {
		certs = n.peerCertificates(remote)
	}
	if len(certs) == 0 {
		return unauthorized("no verified client certificate on this connection")
	}
	return checkWorkerBinding(certs[0], s.WorkerID, n.tls.requireBinding)
}

func checkWorkerBinding(cert *x509.Certificate, workerID string, required bool) error {
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

// raftPeerVerified reports whether r came over TLS with a client certificate that verifies
// against the Raft CA: the caller is a coordinator. The admin listener verified the chain against
// the client CA and the Raft CA together; this tells the two apart.
func (n *Node) raftPeerVerified(r *http.Request) bool {
	if n.tls.raftPool == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := r.TLS.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: n.tls.raftPool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err == nil
}

// ---- Raft over mutual TLS.

// raftTLS puts mutual TLS on the Raft listener and dialer when Raft TLS is configured: the
// listener requires a certificate of the Raft CA, the dialer presents this node's and verifies
// the other node's against the Raft CA under the host name it dials. The dialer goes through dial
// (Config.RaftDial in tests), so a test can still cut this node's traffic.
func (n *Node) raftTLS(ln net.Listener, dial func(ctx context.Context, addr string) (net.Conn, error)) (net.Listener, func(ctx context.Context, addr string) (net.Conn, error)) {
	if n.tls.raftServer == nil {
		return ln, dial
	}
	client := n.tls.raftClient
	failed := func(remote net.Addr, err error) {
		n.tlsLog.raft.log(n.log.With().Stringer("remote", remote).Logger(), "Raft TLS: a connection was refused", err)
	}
	return &tlsListener{Listener: ln, cfg: n.tls.raftServer, failed: failed}, func(ctx context.Context, addr string) (net.Conn, error) {
		raw, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc, err := clientHandshake(ctx, raw, client, addr)
		if err != nil {
			n.tlsLog.raft.log(n.log, "Raft TLS: dial failed", err)
			return nil, err
		}
		return &refusalConn{Conn: tc, refused: func(reason string, err error) {
			n.tlsLog.raftRefused.log(n.log.With().Str("peer_raft_addr", addr).Str("reason", reason).Str("raft_tls_cert", n.cfg.TLS.Raft.Cert).Logger(),
				"Raft TLS: a coordinator refused this node's certificate (the others must trust the CA that signed it, in their --raft-tls-ca)", err)
		}}, nil
	}
}

// refusalConn is a dialled Raft connection that says in words when the other side refused this
// node's certificate. Under TLS 1.3 that refusal arrives as an alert on the first read after the
// handshake, which Raft reports only as "msgpack decode error [pos 0]: remote error: tls: unknown
// certificate authority".
type refusalConn struct {
	*tls.Conn
	refused func(reason string, err error)
	once    sync.Once
}

func (c *refusalConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		if reason, _, ok := tlsfiles.CertificateRefusal(err); ok {
			c.once.Do(func() { c.refused(reason, err) })
		}
	}
	return n, err
}

// clientHandshake runs a client TLS handshake on raw under the host name of addr.
func clientHandshake(ctx context.Context, raw net.Conn, cfg *tls.Config, addr string) (*tls.Conn, error) {
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

// ---- Calls between coordinators' admin ports (registration, forwarded admin calls).

// peerScheme is the scheme of the other coordinators' admin ports: a cluster is configured alike,
// so it is https exactly when this node's own admin port is.
func (n *Node) peerScheme() string {
	if n.tls.admin != nil {
		return "https"
	}
	return "http"
}

// peerURL is the URL of path on another coordinator's admin port.
func (n *Node) peerURL(httpAddr, path string) string {
	return n.peerScheme() + "://" + httpAddr + path
}

// peerHTTPClient is the client of calls to other coordinators' admin ports: with admin TLS it
// verifies their certificates (peerRoots) and presents this node's Raft certificate, which the
// other node's raftPeerVerified recognises.
func (n *Node) peerHTTPClient(timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if n.tls.peerTransport != nil {
		c.Transport = n.tls.peerTransport
	}
	return c
}

// newPeerTransport is the one transport of every call to other coordinators' admin ports under
// TLS, so that their connections are reused.
func newPeerTransport(roots *x509.CertPool, raftClient *tls.Config) *http.Transport {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	if raftClient != nil {
		cfg.GetClientCertificate = raftClient.GetClientCertificate
	}
	return &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: 5 * time.Second}
}

// explainPeerHTTP turns the symptoms of a coordinator whose admin port speaks the other protocol
// into an error that says so; nil when the call did not show such a mismatch. resp may be nil.
func (n *Node) explainPeerHTTP(addr string, resp *http.Response, err error) error {
	switch {
	case err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("coordinator at %s answers plain HTTP on its admin port, and this node uses https (--tls-cert): configure TLS alike on every coordinator", addr)
	case err == nil && resp != nil && resp.StatusCode == http.StatusBadRequest && n.tls.admin == nil && resp.TLS == nil &&
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		// Go's https server answers a plain request with a 400 in text/plain.
		return fmt.Errorf("coordinator at %s answered 400 in plain text, as an https port does to plain HTTP: it has TLS on (--tls-cert) and this node not; configure TLS alike on every coordinator", addr)
	case err != nil && strings.Contains(err.Error(), "x509:"):
		return fmt.Errorf("coordinator at %s: its admin certificate does not verify (with Raft TLS it must be signed by the Raft CA): %w", addr, err)
	}
	return nil
}

// tlsLogs are the rate-limited logs of TLS failures, one per place.
type tlsLogs struct {
	rsocket, raft, peer limitedLog
	// raftRefused is apart from raft: this node's own certificate refused by a peer must not be
	// hidden behind the lines about the peers' connections it refuses itself.
	raftRefused limitedLog
}

// rsocketHandshakeFailed logs why a worker connection's handshake failed: a worker with a
// certificate of the wrong CA, an expired one or none at all shows up here.
func (n *Node) rsocketHandshakeFailed(remote net.Addr, err error) {
	n.limits.explain(remote.String())
	n.tlsLog.rsocket.log(n.log.With().Stringer("remote", remote).Logger(), "RSocket TLS: a worker connection was refused", err)
}

// limitedLog logs at most one line per period: a misconfigured peer or a flood of bad clients
// would otherwise log on every attempt.
type limitedLog struct {
	last       atomic.Int64
	suppressed atomic.Int64
}

const limitedLogPeriod = 10 * time.Second

func (l *limitedLog) log(log zerolog.Logger, msg string, err error) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(limitedLogPeriod) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	log.Warn().Err(err).Int64("similar_suppressed", l.suppressed.Swap(0)).Msg(msg)
}

// adminTLS puts the admin HTTP listener under TLS when it is configured, and sends the server's
// own error lines (a client's failed handshake, for one) to this node's log at debug level.
func (n *Node) adminTLS(srv *http.Server, ln net.Listener) net.Listener {
	srv.ErrorLog = log.New(debugWriter{n.partLog("admin_http")}, "", 0)
	if n.tls.admin == nil {
		return ln
	}
	return tls.NewListener(ln, n.tls.admin)
}

// debugWriter writes each line of a standard logger as a debug line of a zerolog logger.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// raftTLSEnabled reports whether the other coordinators prove themselves on /v1/internal/ with
// their Raft certificate (TLS.coordinatorIdentity).
func (n *Node) raftTLSEnabled() bool { return n.cfg.TLS.coordinatorIdentity() }
