package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
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
//
// Every write of a request is checked, not only its first: a task's JSON fits the transport's
// write buffer with its headers, so a request goes out in one write and is refused whole; a
// request split over writes and refused midway is cut short, which no server executes.

// fencedConn is a connection that refuses writes once the current request's deadline passed.
type fencedConn struct {
	net.Conn
	now      func() time.Time
	deadline atomic.Pointer[time.Time] // nil: no request armed it
	refused  atomic.Bool               // a write of the armed request was refused
}

// arm sets the deadline of the request the connection carries next; zero disarms. The time keeps
// its monotonic reading, so that a step of the wall clock neither lets a late write out nor
// refuses a timely one.
func (c *fencedConn) arm(deadline time.Time) {
	c.refused.Store(false)
	if deadline.IsZero() {
		c.deadline.Store(nil)
		return
	}
	c.deadline.Store(&deadline)
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if d := c.deadline.Load(); d != nil && !c.now().Before(*d) {
		c.refused.Store(true)
		return 0, ErrFenced
	}
	return c.Conn.Write(b)
}

// fencedTransport returns a transport whose connections are fencedConns. TLS, when the URL is
// https, is layered by the transport on top of the fencedConn (directly, or through a proxy's
// CONNECT tunnel), so the fence sees the encrypted records of each request before they are
// written. HTTP/2 stays off (a custom dialer and ForceAttemptHTTP2 false): it would multiplex
// several requests, with different deadlines, on one connection.
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
	return tr
}

// withFence arms the connection that will carry the request of ctx with ctx's deadline, or
// disarms it when ctx has none (a kept-alive connection still holds its last request's). The
// transport calls GotConn on the caller's goroutine before it hands the request to the
// connection's writer, for new and reused connections alike, retries included. fenced reports,
// after the request failed, whether a connection refused it: which error net/http returns then
// (the refused write, or the read side of the connection it closed) is a race of its own.
func withFence(ctx context.Context) (_ context.Context, fenced func() bool) {
	deadline, _ := ctx.Deadline()
	var mu sync.Mutex
	var armed []*fencedConn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if c := fenceOf(info.Conn); c != nil {
				c.arm(deadline)
				mu.Lock()
				armed = append(armed, c)
				mu.Unlock()
			}
		},
	})
	return ctx, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range armed {
			if c.refused.Load() {
				return true
			}
		}
		return false
	}
}

// fenceOf finds the fencedConn under a connection the transport hands out: itself, or under TLS.
func fenceOf(c net.Conn) *fencedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	fc, _ := c.(*fencedConn)
	return fc
}
