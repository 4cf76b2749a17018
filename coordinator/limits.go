package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"golang.org/x/time/rate"

	"github.com/retryring/retryring/lease"
)

// maxSetupBytes bounds what a connection may send before its SETUP is admitted. A SETUP is a few
// hundred bytes (its fields are bounded by lease.Setup.Validate), but an RSocket frame may be
// 16 MiB and rsocket-go buffers a frame whole: without this bound every connection that has not
// authenticated could make the node hold 16 MiB.
const maxSetupBytes = 64 << 10

// Bounds of the busy answer's retry_after_ms.
const (
	minBusyHint = 100 * time.Millisecond
	maxBusyHint = 5 * time.Second
)

// refusal is a reason a coordinator refused a client, the label of the refusals metric.
type refusal int

const (
	refusedUnauthorized  refusal = iota // SETUP without a token valid for its ring
	refusedRevoked                      // a lease stream whose token was revoked
	refusedSetupRate                    // SETUP over --max-setups-per-second: busy
	refusedStreams                      // ring.leases over --max-streams-per-ring: busy
	refusedConnections                  // accepted over --max-connections: closed at once
	refusedSetupTimeout                 // no SETUP admitted within the setup timeout
	refusedSetupTooLarge                // more than maxSetupBytes before the SETUP was admitted
	refusedNoSetup                      // closed before a SETUP was admitted, for no reason above (garbage, bad_setup, silence)
	refusedAdmin                        // mutating admin call without a valid bearer token
	refusedInternal                     // /v1/internal/ call without the cluster secret or a Raft certificate
	numRefusals
)

var refusalNames = [numRefusals]string{"unauthorized", "revoked", "setup_rate", "streams_per_ring", "connections",
	"setup_timeout", "setup_too_large", "no_setup", "admin_unauthorized", "internal_unauthorized"}

func (r refusal) String() string { return refusalNames[r] }

// limits caps what clients may hold of a node: connections (at accept), SETUPs per second
// (busy), lease streams per ring (busy), and the time and bytes before a SETUP is admitted. Every
// cap is off at zero except the last two, which no real client comes near.
type limits struct {
	maxConns     int
	perRing      int
	setupTimeout time.Duration
	setups       *rate.Limiter // nil: no cap
	setupRate    float64
	metrics      *nodeMetrics
	// closedBeforeSetup, if set, is told of each connection closed before its SETUP was admitted
	// that no other line explains (see explain): the reason counted for it and its first failed
	// read, if any.
	closedBeforeSetup func(remote string, r refusal, readErr error)

	mu      sync.Mutex
	conns   map[string]*limitConn // open connections by remote address
	streams map[lease.RingKey]int // lease streams per ring on this node
	// busy answers in the current and the previous second, for the retry hint
	busySec            int64
	busyNow, busyPrior int
}

func newLimits(cfg Config, m *nodeMetrics) *limits {
	l := &limits{maxConns: cfg.MaxConnections, perRing: cfg.MaxStreamsPerRing, setupTimeout: cfg.SetupTimeout,
		setupRate: cfg.MaxSetupsPerSecond, metrics: m,
		conns: map[string]*limitConn{}, streams: map[lease.RingKey]int{}}
	if cfg.MaxSetupsPerSecond > 0 {
		// A burst of one second's worth: a failover's reconnects come all at once.
		l.setups = rate.NewLimiter(rate.Limit(cfg.MaxSetupsPerSecond), max(1, int(cfg.MaxSetupsPerSecond)))
	}
	return l
}

// busyErr is the busy answer: retry_after_ms spreads the refused clients over the time the node
// needs to admit as many as it refused in the last two seconds, at the capped rate.
func (l *limits) busyErr(now time.Time, perSecond float64, format string, args ...any) error {
	l.mu.Lock()
	switch sec := now.Unix(); {
	case sec == l.busySec+1:
		l.busySec, l.busyPrior, l.busyNow = sec, l.busyNow, 0
	case sec != l.busySec:
		l.busySec, l.busyPrior, l.busyNow = sec, 0, 0
	}
	l.busyNow++
	waiting := l.busyNow + l.busyPrior
	l.mu.Unlock()
	hint := time.Second
	if perSecond > 0 {
		hint = time.Duration(float64(waiting) / perSecond * float64(time.Second))
	}
	hint = min(max(hint, minBusyHint), maxBusyHint)
	return &lease.WireError{Code: lease.CodeBusy, Message: fmt.Sprintf(format, args...), RetryAfterMs: hint.Milliseconds()}
}

// admitSetup takes one SETUP from the rate cap, or answers busy.
func (l *limits) admitSetup(now time.Time) error {
	if l.setups == nil || l.setups.AllowN(now, 1) {
		return nil
	}
	return l.busyErr(now, l.setupRate, "more than %v SETUPs per second on this coordinator; retry after retry_after_ms", l.setupRate)
}

// acquireStream counts a lease stream of ring, or answers busy over the cap; release undoes it.
func (l *limits) acquireStream(ring lease.RingKey, now time.Time) (release func(), err error) {
	l.mu.Lock()
	if l.perRing > 0 && l.streams[ring] >= l.perRing {
		l.mu.Unlock()
		l.metrics.refused(refusedStreams)
		return nil, l.busyErr(now, 0, "ring %s has %d lease streams on this coordinator, the most it takes; retry after retry_after_ms", ring, l.perRing)
	}
	l.streams[ring]++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.streams[ring]--; l.streams[ring] <= 0 {
				delete(l.streams, ring)
			}
			l.mu.Unlock()
		})
	}, nil
}

// setupDone lifts the pre-SETUP bounds of the connection from remote: its SETUP was admitted.
func (l *limits) setupDone(remote string) {
	l.mu.Lock()
	c := l.conns[remote]
	l.mu.Unlock()
	if c != nil {
		c.setup.Store(true)
	}
}

// refusedConn marks the connection from remote as refused already (its reason was counted and
// logged), so that its close is not counted again as no_setup.
func (l *limits) refusedConn(remote string) {
	l.mu.Lock()
	c := l.conns[remote]
	l.mu.Unlock()
	if c != nil {
		c.counted.Store(true)
		c.explained.Store(true)
	}
}

// explain marks the connection from remote as explained by a line of its own (a SETUP refused as
// bad_setup, a failed TLS handshake): its close before SETUP still counts as no_setup, but
// closedBeforeSetup does not hear of it.
func (l *limits) explain(remote string) {
	l.mu.Lock()
	c := l.conns[remote]
	l.mu.Unlock()
	if c != nil {
		c.explained.Store(true)
	}
}

// listener wraps the RSocket listener: a connection over the cap is closed as soon as it is
// accepted, and each connection gets the pre-SETUP bounds.
func (l *limits) listener(inner net.Listener) net.Listener {
	return &limitListener{Listener: inner, l: l}
}

type limitListener struct {
	net.Listener
	l *limits
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l := ll.l
		lc := &limitConn{Conn: c, l: l, remote: c.RemoteAddr().String(), deadline: time.Now().Add(l.setupTimeout)}
		l.mu.Lock()
		over := l.maxConns > 0 && len(l.conns) >= l.maxConns
		if !over {
			l.conns[lc.remote] = lc
		}
		l.mu.Unlock()
		if over {
			l.metrics.refused(refusedConnections)
			_ = c.Close()
			continue
		}
		return lc, nil
	}
}

var errSetupTooLarge = errors.New("coordinator: more than 64 KiB before SETUP")

// limitConn bounds a connection until its SETUP is admitted: reads end at the setup deadline
// (rsocket-go reads the SETUP frame with no deadline, and a client that sends a byte now and then
// would never hit the silence timeout), and at most maxSetupBytes are read.
type limitConn struct {
	net.Conn
	l        *limits
	remote   string
	deadline time.Time // process clock: it bounds socket reads

	setup     atomic.Bool
	counted   atomic.Bool  // a refusal was counted for it
	reason    atomic.Int32 // the refusal counted by count
	explained atomic.Bool  // a line of its own says why it ends (explain)
	readErr   atomic.Pointer[error]
	before    atomic.Int64
	once      sync.Once
}

func (c *limitConn) Read(b []byte) (int, error) {
	if c.setup.Load() {
		return c.Conn.Read(b)
	}
	if !time.Now().Before(c.deadline) {
		c.count(refusedSetupTimeout)
		return 0, os.ErrDeadlineExceeded
	}
	n, err := c.Conn.Read(b)
	if err != nil {
		c.readErr.CompareAndSwap(nil, &err)
	}
	if c.before.Add(int64(n)) > maxSetupBytes && !c.setup.Load() {
		c.count(refusedSetupTooLarge)
		c.refuseTooLarge(b)
		return 0, errSetupTooLarge
	}
	if err != nil && !c.setup.Load() && !time.Now().Before(c.deadline) {
		c.count(refusedSetupTimeout)
	}
	return n, err
}

// refuseTooLarge answers a connection that sent too much before its SETUP with REJECTED_SETUP
// bad_setup (the server has written nothing on it yet, so the frame is the first the client
// reads), then reads and drops what the client still sends until it closes or the setup deadline
// passes: closing a socket with unread data would reset the connection, and the client could lose
// the answer.
func (c *limitConn) refuseTooLarge(buf []byte) {
	body, _ := json.Marshal(lease.WireError{Code: lease.CodeBadSetup,
		Message: fmt.Sprintf("more than %d bytes before the SETUP was admitted: a SETUP is far smaller", maxSetupBytes)})
	f := framing.NewWriteableErrorFrame(0, core.ErrorCodeRejectedSetup, body)
	var out bytes.Buffer
	n := f.Len()
	out.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
	_, _ = f.WriteTo(&out)
	_ = c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Conn.Write(out.Bytes())
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = c.Conn.SetReadDeadline(c.deadline)
	for {
		if _, err := c.Conn.Read(buf); err != nil {
			return
		}
	}
}

// SetReadDeadline keeps a read before SETUP within the setup deadline.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	if !c.setup.Load() && (t.IsZero() || t.After(c.deadline)) {
		t = c.deadline
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitConn) count(r refusal) {
	if c.counted.CompareAndSwap(false, true) {
		c.reason.Store(int32(r))
		c.l.metrics.refused(r)
	}
}

func (c *limitConn) Close() error {
	c.once.Do(func() {
		if !c.setup.Load() {
			c.count(refusedNoSetup)
			if !c.explained.Load() && c.l.closedBeforeSetup != nil {
				var readErr error
				if p := c.readErr.Load(); p != nil {
					readErr = *p
				}
				c.l.closedBeforeSetup(c.remote, refusal(c.reason.Load()), readErr)
			}
		}
		c.l.mu.Lock()
		if c.l.conns[c.remote] == c {
			delete(c.l.conns, c.remote)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
