package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// ErrFenced means a request was not sent because its deadline had passed by the time its first
// byte was to be written: the worker stalled (a GC pause, a SIGSTOP) after its guard allowed the
// execution, and the lease that allowed it may have ended meanwhile. Nothing reached the
// downstream service.
var ErrFenced = errors.New("executor: deadline passed before the request was sent; not sent")

// The worker's guard checks the lease before an execution and gives the execution a context whose
// deadline ends before the lease does. A check is only as good as the moment it ran, though: a
// worker stopped between the check and the send would send its request after its lease ended,
// while another worker holds the instance. The fence narrows that gap to the instructions between
// a clock read and a write(2): every connection of the stock transport refuses to write once the
// deadline of the request it is carrying has passed. HTTP/1.1 carries one request at a time per
// connection, so the deadline is set on the connection as the request gets it (httptrace's
// GotConn) and checked on each write of that request. What remains is closed only by the
// downstream service itself, which receives lease_epoch and the Idempotency-Key for that.

// fencedConn is a connection that refuses writes once the current request's deadline passed.
type fencedConn struct {
	net.Conn
	now      func() time.Time
	deadline atomic.Int64 // unix nanoseconds; 0: no request armed it
}

func (c *fencedConn) arm(deadline time.Time) {
	if deadline.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(deadline.UnixNano())
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if d := c.deadline.Load(); d != 0 && c.now().UnixNano() >= d {
		return 0, ErrFenced
	}
	return c.Conn.Write(b)
}

// fencedTransport returns a transport whose connections are fencedConns. HTTPS is dialled and
// handshaken here (so that the fence sits above TLS and sees each request's writes), which keeps
// such connections on HTTP/1.1: HTTP/2 would multiplex several requests on one connection.
func fencedTransport(now func() time.Time) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128 // a worker runs up to --concurrency calls to one host
	tr.ForceAttemptHTTP2 = false
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &fencedConn{Conn: c, now: now}, nil
	}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			raw.Close()
			return nil, fmt.Errorf("executor: dial %s: %w", addr, err)
		}
		tc := tls.Client(raw, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return &fencedConn{Conn: tc, now: now}, nil
	}
	return tr
}

// withFence arms the connection that will carry the request of ctx with ctx's deadline, or
// disarms it when ctx has none (a kept-alive connection still holds its last request's).
func withFence(ctx context.Context) context.Context {
	deadline, _ := ctx.Deadline()
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if c, ok := info.Conn.(*fencedConn); ok {
				c.arm(deadline)
			}
		},
	})
}
