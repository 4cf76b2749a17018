package coordinator

// The coordinator's side of TLS: which listener and which dialer get what (auth.Setup), the
// worker id a client certificate binds, coordinators recognised on the admin port, and calls to
// the other coordinators' admin ports. The connections, the configurations and the checks that
// need no Node are in coordinator/auth.

import (
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/internal/tlsfiles"

	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go"

	"github.com/retryring/retryring/lease"
)

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
	if !n.tls.Mutual {
		return nil
	}
	var certs []*x509.Certificate
	if remote, ok := rsocket.GetAddr(sock); ok {
		certs = n.peerCertificates(remote)
	}
	if len(certs) == 0 {
		return &lease.WireError{Code: lease.CodeUnauthorized, Message: "no verified client certificate on this connection"}
	}
	return auth.CheckWorkerBinding(certs[0], s.WorkerID, n.tls.RequireBinding)
}

// raftPeerVerified reports whether r came over TLS with a client certificate that verifies
// against the Raft CA: the caller is a coordinator. The admin listener verified the chain against
// the client CA and the Raft CA together; this tells the two apart.
func (n *Node) raftPeerVerified(r *http.Request) bool {
	if n.tls.RaftPool == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := r.TLS.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: n.tls.RaftPool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err == nil
}

// ---- Raft over mutual TLS.

// raftTLS puts mutual TLS on the Raft listener and dialer when Raft TLS is configured: the
// listener requires a certificate of the Raft CA, the dialer presents this node's and verifies
// the other node's against the Raft CA under the host name it dials. The dialer goes through dial
// (Config.RaftDial in tests), so a test can still cut this node's traffic.
func (n *Node) raftTLS(ln net.Listener, dial func(ctx context.Context, addr string) (net.Conn, error)) (net.Listener, func(ctx context.Context, addr string) (net.Conn, error)) {
	if n.tls.RaftServer == nil {
		return ln, dial
	}
	client := n.tls.RaftClient
	failed := func(remote net.Addr, err error) {
		n.tlsLog.raft.Log(n.log.With().Stringer("remote", remote).Logger(), "Raft TLS: a connection was refused", err)
	}
	return &auth.Listener{Listener: ln, Config: n.tls.RaftServer, Failed: failed}, func(ctx context.Context, addr string) (net.Conn, error) {
		raw, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		tc, err := auth.ClientHandshake(ctx, raw, client, addr)
		if err != nil {
			n.tlsLog.raft.Log(n.log, "Raft TLS: dial failed", err)
			return nil, err
		}
		return &refusalConn{Conn: tc, refused: func(reason string, err error) {
			n.tlsLog.raftRefused.Log(n.log.With().Str("peer_raft_addr", addr).Str("reason", reason).Str("raft_tls_cert", n.cfg.TLS.Raft.Cert).Logger(),
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

// ---- Calls between coordinators' admin ports (registration, forwarded admin calls).

// peerScheme is the scheme of the other coordinators' admin ports: a cluster is configured alike,
// so it is https exactly when this node's own admin port is.
func (n *Node) peerScheme() string {
	if n.tls.Admin != nil {
		return "https"
	}
	return "http"
}

// peerURL is the URL of path on another coordinator's admin port, given as host:port or as a URL
// (an operator's --join may carry one); a bare address gets the scheme the coordinators speak among
// themselves (peerScheme).
func (n *Node) peerURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = n.peerScheme() + "://" + addr
	}
	return strings.TrimRight(addr, "/") + path
}

// peerHTTPClient is the client of calls to other coordinators' admin ports: with admin TLS it
// verifies their certificates (peerRoots) and presents this node's Raft certificate, which the
// other node's raftPeerVerified recognises.
func (n *Node) peerHTTPClient(timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if n.tls.PeerTransport != nil {
		c.Transport = n.tls.PeerTransport
	}
	return c
}

// explainPeerHTTP turns the symptoms of a coordinator whose admin port speaks the other protocol
// into an error that says so; nil when the call did not show such a mismatch. resp may be nil.
func (n *Node) explainPeerHTTP(addr string, resp *http.Response, err error) error {
	switch {
	case err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("coordinator at %s answers plain HTTP on its admin port, and this node uses https (--tls-cert): configure TLS alike on every coordinator", addr)
	case err == nil && resp != nil && resp.StatusCode == http.StatusBadRequest && n.tls.Admin == nil && resp.TLS == nil &&
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
	rsocket, raft, peer auth.LimitedLog
	// raftRefused is apart from raft: this node's own certificate refused by a peer must not be
	// hidden behind the lines about the peers' connections it refuses itself.
	raftRefused auth.LimitedLog
}

// rsocketHandshakeFailed logs why a worker connection's handshake failed: a worker with a
// certificate of the wrong CA, an expired one or none at all shows up here.
func (n *Node) rsocketHandshakeFailed(remote net.Addr, err error) {
	n.limits.explain(remote.String())
	n.tlsLog.rsocket.Log(n.log.With().Stringer("remote", remote).Logger(), "RSocket TLS: a worker connection was refused", err)
}

// adminTLS puts the admin HTTP listener under TLS when it is configured, and sends the server's
// own error lines (a client's failed handshake, for one) to this node's log at debug level.
func (n *Node) adminTLS(srv *http.Server, ln net.Listener) net.Listener {
	srv.ErrorLog = log.New(debugWriter{n.partLog("admin_http")}, "", 0)
	if n.tls.Admin == nil {
		return ln
	}
	return tls.NewListener(ln, n.tls.Admin)
}

// debugWriter writes each line of a standard logger as a debug line of a zerolog logger.
type debugWriter struct{ log zerolog.Logger }

func (w debugWriter) Write(p []byte) (int, error) {
	w.log.Debug().Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// raftTLSEnabled reports whether the other coordinators prove themselves on /v1/internal/ with
// their Raft certificate (auth.TLS.CoordinatorIdentity).
func (n *Node) raftTLSEnabled() bool { return n.cfg.TLS.CoordinatorIdentity() }
