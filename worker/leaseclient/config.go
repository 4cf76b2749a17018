package leaseclient

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Defaults of Config. Zero values in a Config mean these.
const (
	// DefaultGuardMargin is the validity a lease must have left beyond an operation's timeout.
	DefaultGuardMargin = 100 * time.Millisecond
	// DefaultKeepalive is the KEEPALIVE period. The coordinator requires at most MaxKeepalive.
	DefaultKeepalive = 300 * time.Millisecond
	// MaxKeepalive is the longest KEEPALIVE period the protocol allows: the coordinator closes a
	// connection it read nothing from for 750 ms and treats the worker as down, so at 300 ms a
	// KEEPALIVE may come 450 ms late (one lost and the next 150 ms late) before that happens. It
	// was 200 ms (550 ms of slack) until the KEEPALIVEs and their answers, 10,000 frames a second
	// at 1,000 workers, were found to be most of the leader's CPU (docs/benchmarks.md, figure 10).
	MaxKeepalive = 300 * time.Millisecond
	// DefaultKeepaliveLifetime is how long the client waits without reading anything (the
	// coordinator answers every KEEPALIVE that asks for it) before it drops the connection and
	// reconnects.
	DefaultKeepaliveLifetime = time.Second
	// DefaultKeepaliveAnswerEvery: the client asks for an answer on every other KEEPALIVE. At the
	// default period that is an answer every 600 ms against a lifetime of 1 s: one may come 400 ms
	// late. The leader writes half the answers it wrote when every KEEPALIVE asked for one
	// (docs/benchmarks.md, figure 10); the KEEPALIVEs themselves, which tell the coordinator the
	// worker is alive, still go every period.
	DefaultKeepaliveAnswerEvery = 2
	// DefaultDialTimeout bounds the TCP connect.
	DefaultDialTimeout = 2 * time.Second
	// DefaultRequestTimeout bounds a ring.release the client sends on its own.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the reconnect delay once no usable lease is held.
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 5 * time.Second
	// DefaultBackoffHolding is the mean spacing of the first reconnect attempts while the worker
	// holds a usable lease: the first after an element goes at once, the next waits a uniform draw
	// from [50, 150) ms, and the mean doubles with each one after, up to 10 × this (1 s).
	DefaultBackoffHolding = 100 * time.Millisecond
	// DefaultReportPeriod is how often ring.report goes out: the protocol's period, which the
	// leader's "older than three periods reads unknown" rule is built on.
	DefaultReportPeriod = lease.ReportPeriod
)

// maxIDLen mirrors lease.Setup.Validate.
const maxIDLen = 256

// Backoff paces reconnect attempts (docs/protocol.md section 9; the address order is in
// redial.go). While the Guard holds a usable lease (its end is still ahead on the worker clock),
// the first retry after an element goes at once and the k-th next one waits a uniform draw from
// [m/2, 3m/2) with m = min(Holding·2^(k-1), 10·Holding): the worker must reach the new leader of a
// failover before that lease runs out, and a doubling delay grown to seconds over an election's
// failed attempts would sleep through it (77 of 160 probe-trials lost their lease in the
// leader-kill benchmark), while a flat 100 ms for a whole lease made a storm of 1,000 workers
// (bench/swarm). Once no usable lease is held, before paced
// attempt n (0-based, counted since the last element or since the lease ran out) the client sleeps
// a uniform draw from [0, min(Max, Min·2^n)) — "full jitter", so that workers cut off together do
// not reconnect together, and a worker with nothing to lose spares the coordinators. After
// bad_setup, duplicate_connection or unauthorized it waits a draw from [Max/2, Max), lease or not.
type Backoff struct {
	// Min is the first ceiling of the doubling. Default DefaultBackoffMin.
	Min time.Duration
	// Max is the last ceiling of the doubling and the delay after a configuration error. Default
	// DefaultBackoffMax.
	Max time.Duration
	// Holding is the mean spacing of the first retries while a usable lease is held (it doubles
	// up to 10 × Holding). With the defaults a worker cut off for a whole 10 s lease makes about 15
	// attempts, each a refused TCP connect or a SETUP answered by an error. Default
	// DefaultBackoffHolding.
	Holding time.Duration
}

// Config configures a Client. Zero values mean the documented defaults.
type Config struct {
	// WorkerID names the worker in its ring. Required, at most 256 bytes.
	WorkerID string
	// Incarnation distinguishes this process from earlier ones with the same WorkerID. Empty means
	// a random one, drawn once in New and kept across reconnects.
	Incarnation string
	// Ring is the ring the worker joins. Required.
	Ring lease.RingKey
	// Token is sent in SETUP when the coordinators require authentication. Optional.
	Token string
	// Coordinators are RSocket addresses (host:port) of any coordinator nodes. Required.
	Coordinators []string
	// TLS, when set, makes every connection TLS with this configuration (tlsfiles.Client builds
	// it from the worker's --coordinator-ca, --coordinator-cert and --coordinator-key). Each dial
	// verifies the coordinator's certificate under the host name dialled, unless ServerName is
	// set. Nil: plain TCP.
	TLS *tls.Config
	// Clock is the worker's monotonic clock; lease validity is counted on it. Default lease.SystemClock.
	Clock lease.Clock
	// GuardMargin is the Guard's margin. Default DefaultGuardMargin.
	GuardMargin time.Duration
	// Guard, when set, is the Guard this client feeds instead of a new one (Clock and GuardMargin
	// are then the Guard's): a worker that left its ring while its clock was untrusted rejoins
	// with a new client and keeps the Guard its data plane asks.
	Guard *lease.Guard
	// Keepalive is the KEEPALIVE period, at most MaxKeepalive. Default DefaultKeepalive.
	Keepalive time.Duration
	// KeepaliveLifetime is how long the client tolerates reading nothing (from the first byte on) or
	// a write that does not complete, before it drops the connection. Default DefaultKeepaliveLifetime.
	KeepaliveLifetime time.Duration
	// KeepaliveAnswerEvery: one KEEPALIVE in this many asks the coordinator for an answer (the
	// respond flag); 1 asks on every one. The lifetime must cover this many periods and one more.
	// Default DefaultKeepaliveAnswerEvery.
	KeepaliveAnswerEvery int
	// DialTimeout bounds each TCP connect. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds each ring.release the client sends by itself. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Backoff paces reconnect attempts. Defaults DefaultBackoffMin, DefaultBackoffMax and
	// DefaultBackoffHolding.
	Backoff Backoff
	// Logger receives the client's logs. The zero value logs nothing. The client adds component,
	// worker_id, incarnation and ring to every line, so a logger given here carries none of them.
	Logger zerolog.Logger
	// Drain, if set, is called after the Guard switched to a lease new that dropped tokens (or
	// Node-0) held under old, and before ring.release; and on Leave with a new lease that has no
	// ranges and NodeIndex -1 (the Guard is already cleared then). It
	// returns once in-flight operations on the dropped tokens have finished or been abandoned. An
	// error (or a panic) means "not drained": the client then sends no release and the coordinator
	// frees the tokens when old expires. Calls never overlap.
	Drain func(ctx context.Context, old, new lease.Lease) error
	// OnLease, if set, is called after each element is installed in the Guard, on the connection's
	// read goroutine: it must return quickly. For tests and benchmarks.
	OnLease func(lease.Lease)
	// OnElement, if set, is called right after OnLease with the same element, the address of the
	// connection it came on and the client's clock at that moment (see Element); same goroutine,
	// same rule: it must return quickly. For benchmarks and test harnesses that watch many clients.
	OnElement func(Element)
	// Report, if set, is what the worker saw, sent as ring.report every ReportPeriod on the
	// current connection and once right after each new lease (the first element of a connection,
	// or a new epoch). It runs on the client's own goroutine and should return quickly; its
	// WorkerID is filled in. Without it no report is sent.
	Report func() lease.Report
	// ReportPeriod is how often Report is sent. Default DefaultReportPeriod.
	ReportPeriod time.Duration
}

// withDefaults fills zero fields. It does not draw the incarnation (New does, once).
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = lease.SystemClock{}
	}
	if c.GuardMargin == 0 {
		c.GuardMargin = DefaultGuardMargin
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.KeepaliveLifetime == 0 {
		c.KeepaliveLifetime = DefaultKeepaliveLifetime
	}
	if c.KeepaliveAnswerEvery == 0 {
		c.KeepaliveAnswerEvery = DefaultKeepaliveAnswerEvery
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Backoff.Min == 0 {
		c.Backoff.Min = DefaultBackoffMin
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = DefaultBackoffMax
	}
	if c.Backoff.Holding == 0 {
		c.Backoff.Holding = DefaultBackoffHolding
	}
	if c.ReportPeriod == 0 {
		c.ReportPeriod = DefaultReportPeriod
	}
	return c
}

// Validate reports the first problem of c (after defaults), wrapped in ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.WorkerID == "":
		return bad("worker id is empty")
	case len(c.WorkerID) > maxIDLen || len(c.Incarnation) > maxIDLen:
		return bad("worker id and incarnation are limited to %d bytes", maxIDLen)
	case len(c.Coordinators) == 0:
		return bad("no coordinator address")
	case c.GuardMargin < 0 || c.DialTimeout < 0 || c.RequestTimeout < 0 || c.ReportPeriod < 0:
		return bad("negative duration")
	case c.Keepalive < 0 || c.Keepalive > MaxKeepalive:
		return bad("keepalive %v must be in (0, %v]: the coordinator drops silent workers", c.Keepalive, MaxKeepalive)
	case c.KeepaliveAnswerEvery < 0:
		return bad("keepalive answer every %d: want 1 or more, or 0 for the default", c.KeepaliveAnswerEvery)
	case c.KeepaliveLifetime < time.Duration(c.KeepaliveAnswerEvery+1)*c.Keepalive:
		return bad("keepalive lifetime %v must be at least %d keepalive periods (%v): an answer comes every %d, and one may be late",
			c.KeepaliveLifetime, c.KeepaliveAnswerEvery+1, time.Duration(c.KeepaliveAnswerEvery+1)*c.Keepalive, c.KeepaliveAnswerEvery)
	case c.Backoff.Holding < 0:
		return bad("backoff while holding %v is negative", c.Backoff.Holding)
	case c.Backoff.Min < 0 || c.Backoff.Max < c.Backoff.Min:
		return bad("backoff [%v, %v] is not a range", c.Backoff.Min, c.Backoff.Max)
	}
	if err := c.Ring.Validate(); err != nil {
		return bad("%v", err)
	}
	for _, addr := range c.Coordinators {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return bad("coordinator address %q: %v", addr, err)
		}
	}
	return nil
}

// newIncarnation draws 128 random bits: two processes never share one.
func newIncarnation() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("leaseclient: drawing an incarnation: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
