package leaseclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsocket/rsocket-go/core/transport"

	"github.com/retryring/retryring/internal/rsclient"
)

// silenceConn bounds every Read and Write of a connection by the keepalive lifetime.
//
// rsocket-go's client sets a read deadline only after it has dispatched a frame, so a connection to
// a coordinator that accepted TCP but never answers (hung process, black-holed network) would block
// forever before the first frame: the client would never move on to another coordinator. Here every
// Read waits at most the lifetime (the coordinator answers every KEEPALIVE that asks for it, and
// answerAsker asks on one in KeepaliveAnswerEvery, so a live one is never that silent), and
// rsocket-go's own deadlines are ignored. A Write that stalls as long closes the
// connection, because rsocket-go only logs write errors.
//
// A failed Read also calls readFailed first (the session's hook, see session.sendMu): rsocket-go's
// read goroutine closes the connection right after a failed read, and the session must stop
// sending before that.
type silenceConn struct {
	net.Conn
	timeout    time.Duration
	readFailed func()
	// tls: the connection is TLS; its first failed Read is kept (tlsAlert), because rsocket-go
	// drops it and a TLS alert there is the only word of why the coordinator refused us.
	tls     bool
	readErr atomic.Pointer[error]
	// asker, if set, clears the respond flag on some of rsocket-go's KEEPALIVEs.
	asker *answerAsker

	closeOnce sync.Once
	closeErr  error
}

func (c *silenceConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.tls {
		c.readErr.CompareAndSwap(nil, &err)
	}
	if err != nil && c.readFailed != nil {
		c.readFailed()
	}
	return n, err
}

func (c *silenceConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	if c.asker != nil {
		b = c.asker.frames(b)
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

// tlsAlert returns the TLS alert the coordinator sent before closing the connection, if any: under
// TLS 1.3 the client's handshake ends before the server has checked the client's certificate, so
// a refused certificate (unknown CA, expired, none) shows up on the first read, not in the dial.
func (c *silenceConn) tlsAlert() error {
	p := c.readErr.Load()
	if p == nil {
		return nil
	}
	var alert tls.AlertError
	var op *net.OpError
	if errors.As(*p, &alert) || (errors.As(*p, &op) && op.Op == "remote error") {
		return *p
	}
	return nil
}

// dialConn dials addr, runs the TLS handshake when tlsCfg is set, and wraps the connection in a
// silenceConn, all before rsocket-go is given it (predialed). The coordinator is asked to answer
// one KEEPALIVE in answerEvery.
func dialConn(ctx context.Context, addr string, silence time.Duration, tlsCfg *tls.Config, answerEvery int) (*silenceConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		if conn, err = clientHandshake(ctx, conn, tlsCfg, addr); err != nil {
			return nil, err
		}
	}
	sc := &silenceConn{Conn: conn, timeout: silence, tls: tlsCfg != nil}
	if answerEvery > 1 {
		sc.asker = &answerAsker{every: answerEvery}
	}
	return sc, nil
}

// predialed hands rsocket-go a connection that is already open, through rsclient's writer.
// rsocket-go starts its KEEPALIVE ticker before it asks its transport for the connection, and its
// write loop sends the first KEEPALIVE as soon as it runs, while Start is still writing SETUP
// through the same unguarded buffer: when the dial (a TLS handshake to a distant coordinator, a
// busy host) takes longer than one KEEPALIVE period, a tick is already waiting. Dialling first
// makes that rare (Start reaches SETUP microseconds after the ticker starts); rsclient makes it
// harmless (one writer at a time, SETUP first), since a busy host can still delay Start past a tick.
func predialed(sc *silenceConn) transport.ClientTransporter {
	return rsclient.Transport(sc)
}

// clientHandshake runs the TLS handshake on conn, verifying the coordinator under the host name of
// addr unless cfg names one; a failure closes conn and says what went wrong.
func clientHandshake(ctx context.Context, conn net.Conn, cfg *tls.Config, addr string) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		if refused := certificateRefused(err); refused != nil {
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, refused)
		}
		hint := ""
		if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection reset") {
			hint = " (the coordinator closed the connection: is TLS on at the coordinator, --tls-cert?)"
		} else if strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
			hint = " (the coordinator answered in plain text: TLS is off at the coordinator)"
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w%s", addr, err, hint)
	}
	return tc, nil
}
