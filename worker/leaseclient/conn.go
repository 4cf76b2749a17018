package leaseclient

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/rsocket/rsocket-go/core/transport"
)

// silenceConn bounds every Read and Write of a connection by the keepalive lifetime.
//
// rsocket-go's client sets a read deadline only after it has dispatched a frame, so a connection to
// a coordinator that accepted TCP but never answers (hung process, black-holed network) would block
// forever before the first frame: the client would never move on to another coordinator. Here every
// Read waits at most the lifetime (the coordinator echoes each KEEPALIVE, so a live one is never
// that silent), and rsocket-go's own deadlines are ignored. A Write that stalls as long closes the
// connection, because rsocket-go only logs write errors.
//
// A failed Read also calls readFailed first (the session's hook, see session.sendMu): rsocket-go's
// read goroutine closes the connection right after a failed read, and the session must stop
// sending before that.
type silenceConn struct {
	net.Conn
	timeout    time.Duration
	readFailed func()

	closeOnce sync.Once
	closeErr  error
}

func (c *silenceConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.readFailed != nil {
		c.readFailed()
	}
	return n, err
}

func (c *silenceConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	if err != nil {
		_ = c.Close()
	}
	return n, err
}

// SetDeadline, SetReadDeadline and SetWriteDeadline ignore rsocket-go's deadlines: Read and Write
// set their own.
func (c *silenceConn) SetDeadline(time.Time) error { return nil }

// SetReadDeadline is ignored; see SetDeadline.
func (c *silenceConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is ignored; see SetDeadline.
func (c *silenceConn) SetWriteDeadline(time.Time) error { return nil }

func (c *silenceConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// tcpTransport dials addr for rsocket-go, wraps the connection in a silenceConn and hands that to
// dialed before rsocket-go uses it.
func tcpTransport(addr string, silence time.Duration, dialed func(*silenceConn)) transport.ClientTransporter {
	return func(ctx context.Context) (*transport.Transport, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		sc := &silenceConn{Conn: conn, timeout: silence}
		dialed(sc)
		return transport.NewTCPClientTransport(sc), nil
	}
}
