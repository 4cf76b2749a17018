package coordinator

import (
	"github.com/retryring/retryring/coordinator/auth"

	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// silenceListener wraps the RSocket listener so that every accepted connection is closed once
// nothing was read from it for the silence timeout, and once a write stalls for the write timeout.
//
// rsocket-go's server never sends keepalives of its own and keeps a 90 s read deadline whatever the
// client's SETUP says (it even reads the SETUP frame with no deadline at all), so a hung, stopped or
// cut-off worker would hold its ranges for 90 s. Each Read here waits at most the silence timeout:
// the deadlines rsocket-go sets are ignored, ours is set before every Read. A timed-out Read fails
// rsocket-go's read loop, which closes the socket and fires OnClose, where the worker is marked down.
// A failed write closes the connection for the same reason: rsocket-go only logs write errors.
//
// rsocket-go is handed a keepaliveConn over it (over the TLS connection, with TLS), which answers
// the workers' KEEPALIVE frames itself (keepalive.go); its reads go through Read here, so a
// KEEPALIVE that rsocket-go never sees is a sign of life all the same.
//
// It also keeps every open connection by remote address, so that the coordinator closes a worker
// connection by closing its net.Conn: rsocket-go then tears the socket down from its own read loop,
// after that loop stopped dispatching frames. Closing the rsocket socket from another goroutine
// races with frames being dispatched to the streams it disposes.
//
// With tls set, every connection is TLS over the silence connection (auth.ServerConn): the
// handshake, from the first byte on, is bounded as a whole by the handshake timeout instead of the
// silence timeout per read (handshakeUntil), closeRemote still closes the TCP connection, and the verified client
// certificates stay reachable by remote address (peerCertificates).
type silenceListener struct {
	net.Listener
	silence time.Duration
	write   time.Duration
	tls     *tls.Config
	// tlsFailed, if set, is told why a handshake failed.
	tlsFailed func(remote net.Addr, err error)
	// tlsSlots bounds the handshakes under way at once.
	tlsSlots chan struct{}

	mu    sync.Mutex
	conns map[string]*silenceConn
}

func newSilenceListener(l net.Listener, silence, write time.Duration) *silenceListener {
	return &silenceListener{Listener: l, silence: silence, write: write, conns: map[string]*silenceConn{}}
}

func (l *silenceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &silenceConn{Conn: c, silence: l.silence, write: l.write, owner: l}
	var out net.Conn = sc
	if l.tls != nil {
		sc.tls = auth.NewServerConn(sc, l.tls, auth.AnswerPlainRSocket, l.tlsFailed, l.tlsSlots)
		out = sc.tls
	}
	out = &keepaliveConn{Conn: out}
	l.mu.Lock()
	l.conns[c.RemoteAddr().String()] = sc
	l.mu.Unlock()
	return out, nil
}

// peerCertificates returns the verified client certificates of the TLS connection from remote.
func (l *silenceListener) peerCertificates(remote string) []*x509.Certificate {
	l.mu.Lock()
	c := l.conns[remote]
	l.mu.Unlock()
	if c == nil || c.tls == nil {
		return nil
	}
	return c.tls.PeerCertificates()
}

// closeRemote closes the connection from remote; false if there is none.
func (l *silenceListener) closeRemote(remote string) bool {
	l.mu.Lock()
	c := l.conns[remote]
	l.mu.Unlock()
	if c == nil {
		return false
	}
	_ = c.Close()
	return true
}

type silenceConn struct {
	net.Conn
	silence time.Duration
	write   time.Duration
	owner   *silenceListener
	tls     *auth.ServerConn // the TLS connection over this one, if the port speaks TLS
	// handshakeUntil, while set (Unix ns), is the read deadline instead of the silence timeout:
	// during a TLS handshake the client computes between its flights, and hundreds of workers
	// reconnecting at once after a failover made some take longer than the silence timeout (they
	// were cut off and backed off, and lost their leases). the handshake timeout bounds the whole
	// handshake instead.
	handshakeUntil atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

func (c *silenceConn) Read(b []byte) (int, error) {
	deadline := time.Now().Add(c.silence)
	if until := c.handshakeUntil.Load(); until != 0 {
		deadline = time.Unix(0, until)
	}
	if err := c.Conn.SetReadDeadline(deadline); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *silenceConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.write)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		_ = c.Close()
	}
	return n, err
}

// SetHandshakeDeadline makes t the read deadline until it is called with the zero time.
func (c *silenceConn) SetHandshakeDeadline(t time.Time) {
	if t.IsZero() {
		c.handshakeUntil.Store(0)
		return
	}
	c.handshakeUntil.Store(t.UnixNano())
}

// SetReadDeadline, SetWriteDeadline and SetDeadline ignore rsocket-go's 90 s deadlines: Read and
// Write set their own.
func (c *silenceConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is ignored; see SetReadDeadline.
func (c *silenceConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline is ignored; see SetReadDeadline.
func (c *silenceConn) SetDeadline(time.Time) error { return nil }

func (c *silenceConn) Close() error {
	c.closeOnce.Do(func() {
		c.owner.mu.Lock()
		if c.owner.conns[c.RemoteAddr().String()] == c {
			delete(c.owner.conns, c.RemoteAddr().String())
		}
		c.owner.mu.Unlock()
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}
