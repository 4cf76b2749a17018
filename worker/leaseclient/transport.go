package leaseclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/extension"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"

	"github.com/retryring/retryring/internal/rsocketerr"
	"github.com/retryring/retryring/internal/tlsfiles"
	"github.com/retryring/retryring/lease"
)

// routingMetadata is the composite metadata of a request: one message/x.rsocket.routing.v0 entry
// naming route.
func routingMetadata(route string) ([]byte, error) {
	tag, err := extension.EncodeRouting(route)
	if err != nil {
		return nil, fmt.Errorf("leaseclient: routing tag %q: %w", route, err)
	}
	md, err := extension.NewCompositeMetadataBuilder().PushWellKnown(extension.MessageRouting, tag).Build()
	if err != nil {
		return nil, fmt.Errorf("leaseclient: composite metadata for %q: %w", route, err)
	}
	return md, nil
}

// remoteError turns what rsocket-go reports into an error of ours. Error frames whose data is the
// catalog's JSON (APPLICATION_ERROR on a stream, REJECTED_SETUP on the connection) become a
// *lease.WireError, so that errors.Is(err, lease.ErrNotLeader) and errors.As to *lease.WireError
// work; anything else is ErrDisconnected.
func remoteError(err error) (out error) {
	if err == nil {
		return nil
	}
	// A released frame panics when read; then all we know is that the connection is gone.
	defer func() {
		if r := recover(); r != nil {
			if !releasedFrame(r) {
				panic(r)
			}
			out = fmt.Errorf("%w: unreadable error frame (%v)", ErrDisconnected, r)
		}
	}()
	var re rsocket.Error
	if !errors.As(err, &re) {
		if errors.Is(err, ErrDisconnected) {
			return err // block already said how the connection was lost
		}
		return fmt.Errorf("%w: %w", ErrDisconnected, readable{err})
	}
	code := re.ErrorCode()
	data := bytes.Clone(re.ErrorData())
	switch code {
	case rsocket.ErrorCodeApplicationError, rsocket.ErrorCodeRejectedSetup, rsocket.ErrorCodeInvalidSetup,
		rsocket.ErrorCodeUnsupportedSetup, rsocket.ErrorCodeRejected, rsocket.ErrorCodeInvalid:
		werr := lease.FromWire(data)
		if errors.Is(werr, lease.ErrNoLeader) {
			if addrs := coordinatorAddrs(data); len(addrs) > 0 {
				werr = &coordinatorsHint{err: werr, addrs: addrs}
			}
		}
		return fmt.Errorf("rsocket %s: %w", code, werr)
	default:
		return fmt.Errorf("%w: rsocket %s: %.200s", ErrDisconnected, code, data)
	}
}

// readable is an error of rsocket-go with the text rsocketerr.Readable makes of it ("read frame
// failed: EOF", not "read frame failed:: EOF"); errors.Is and errors.As still see the cause.
type readable struct{ err error }

func (r readable) Error() string { return rsocketerr.Readable(r.err.Error()) }

func (r readable) Unwrap() error { return r.err }

// redirectTarget returns the leader's address if err is a not_leader that names one.
func redirectTarget(err error) (leaderID, addr string, ok bool) {
	var we *lease.WireError
	if errors.As(err, &we) && we.Code == lease.CodeNotLeader && we.LeaderRSocketAddr != "" {
		return we.LeaderID, we.LeaderRSocketAddr, true
	}
	return "", "", false
}

// coordinatorsHint is a no_leader answer that names the coordinators the answering node knows
// (docs/protocol.md section 9): the client adds their addresses to the ones it cycles through.
type coordinatorsHint struct {
	err   error
	addrs []string
}

func (h *coordinatorsHint) Error() string { return h.err.Error() }

func (h *coordinatorsHint) Unwrap() error { return h.err }

// coordinatorAddrs reads the optional "coordinators" array of an error body: the rsocket_addr of
// each entry, unchecked (dialPlan.learn drops what is not host:port). A body without one, or with
// one of another shape, names none.
func coordinatorAddrs(data []byte) []string {
	var body struct {
		Coordinators []struct {
			ID          string `json:"id"`
			RSocketAddr string `json:"rsocket_addr"`
		} `json:"coordinators"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil
	}
	var addrs []string
	for _, c := range body.Coordinators {
		if c.RSocketAddr != "" {
			addrs = append(addrs, c.RSocketAddr)
		}
	}
	return addrs
}

// hintedCoordinators returns the addresses a no_leader answer in err's chain named, if any.
func hintedCoordinators(err error) []string {
	var h *coordinatorsHint
	if errors.As(err, &h) {
		return h.addrs
	}
	return nil
}

// session is one RSocket connection to one coordinator.
type session struct {
	addr   string
	sock   rsocket.Client
	conn   *silenceConn       // set by the transport before SETUP goes out
	cancel context.CancelFunc // ends the context rsocket-go runs the connection on
	routes map[string][]byte

	closed    chan struct{}
	closeOnce sync.Once
	mu        sync.Mutex
	closeErr  error

	// sendMu orders the client's frame sends before rsocket-go closes the connection. rsocket-go
	// closes a connection's send queue while other goroutines may be sending to it; it recovers the
	// panic of a send on the closed queue, so nothing breaks, but it is a data race that -race
	// reports in every test that loses a connection. Every send holds sendMu shared and skips once
	// closing is set; the two closers take it exclusively and set closing first: session.close,
	// and readFailed, which silenceConn calls on rsocket-go's read goroutine just before that
	// goroutine closes the connection after a failed read.
	sendMu  sync.RWMutex
	closing bool
}

// readFailWait bounds how long readFailed waits for a send in flight. A REQUEST_N send waits until
// its frame is written, which on a broken connection happens only once rsocket-go has closed it:
// waiting for that would deadlock, so after readFailWait the close goes ahead regardless.
const readFailWait = 50 * time.Millisecond

// send runs fn, which sends frames, unless the session is closing; it reports whether fn ran.
func (s *session) send(fn func()) bool {
	s.sendMu.RLock()
	defer s.sendMu.RUnlock()
	if s.closing {
		return false
	}
	fn()
	return true
}

// readFailed stops sends before rsocket-go closes the connection after a failed read.
func (s *session) readFailed() {
	deadline := time.Now().Add(readFailWait)
	for !s.sendMu.TryLock() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	s.closing = true
	s.sendMu.Unlock()
}

// onClose is rsocket-go's close callback: err is the REJECTED_SETUP or connection error, if any.
func (s *session) onClose(err error) {
	mapped := remoteError(err)
	s.mu.Lock()
	if s.closeErr == nil {
		s.closeErr = mapped
	}
	s.mu.Unlock()
	s.closeOnce.Do(func() { close(s.closed) })
}

func (s *session) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeErr == nil {
		return fmt.Errorf("%w: connection to %s closed", ErrDisconnected, s.addr)
	}
	return s.closeErr
}

// withTLSAlert adds to a lost connection's err the TLS alert the coordinator sent, if any (see
// silenceConn.tlsAlert): "remote error: tls: unknown certificate authority" says what
// "connection closed" does not.
func (s *session) withTLSAlert(err error) error {
	if err == nil || s.conn == nil || !errors.Is(err, ErrDisconnected) {
		return err
	}
	if alert := s.conn.tlsAlert(); alert != nil {
		if refused := certificateRefused(alert); refused != nil {
			return fmt.Errorf("%w: %w", err, refused)
		}
		return fmt.Errorf("%w: the coordinator refused the TLS connection: %w", err, alert)
	}
	return err
}

// certificateRefused says, naming the worker's flags, that the coordinator refused this worker's
// client certificate, if err is such a refusal; else nil.
func certificateRefused(err error) error {
	reason, required, ok := tlsfiles.CertificateRefusal(err)
	switch {
	case !ok:
		return nil
	case required:
		return fmt.Errorf("the coordinator requires a client certificate: give the worker --coordinator-cert and --coordinator-key (%w)", err)
	default:
		return fmt.Errorf("the coordinator refused this worker's client certificate (--coordinator-cert): %s (%w)", reason, err)
	}
}

// closeWait bounds how long close waits for rsocket-go to close the socket by itself once the
// connection under it is closed: its read goroutine sees the end at once on a local close.
const closeWait = 2 * time.Second

// close closes the connection; rsocket-go then errors every stream and request on it.
//
// The connection under rsocket-go is closed first, and rsocket-go left to notice: its read
// goroutine then waits for the goroutines that deliver the frames read so far, and only then
// closes the socket, which ends every stream (onClose runs after that). Closing the socket from
// here instead ends the streams while a frame may still be being delivered to one of them:
// reactor-go's unicast processor closes its queue channel unsynchronised with a send on it,
// which -race reports as a data race (seen in TestNewIncarnationWaitsForTheOldLease/cut) and
// which could panic with "send on closed channel" without it. The socket's own Close follows,
// a no-op by then, or the fallback when rsocket-go did not close within closeWait.
func (s *session) close() {
	s.sendMu.Lock()
	s.closing = true
	s.sendMu.Unlock()
	if s.conn != nil && s.sock != nil {
		_ = s.conn.Close()
		t := time.NewTimer(closeWait)
		select {
		case <-s.closed:
		case <-t.C:
		}
		t.Stop()
	}
	if s.sock != nil {
		_ = s.sock.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.closeOnce.Do(func() { close(s.closed) })
}

// call sends a request-response on route with req as JSON data and returns a copy of the answer's data.
func (s *session) call(ctx context.Context, route string, req any) ([]byte, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("leaseclient: encoding %s request: %w", route, err)
	}
	var m mono.Mono
	if !s.send(func() { m = s.sock.RequestResponse(payload.New(data, s.routes[route])) }) {
		return nil, fmt.Errorf("leaseclient: %s: %w: connection to %s closing", route, ErrDisconnected, s.addr)
	}
	p, err := block(ctx, m)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("leaseclient: %s: %w", route, ctxErr)
		}
		return nil, fmt.Errorf("leaseclient: %s via %s: %w", route, s.addr, remoteError(err))
	}
	if p == nil {
		return nil, nil
	}
	return bytes.Clone(p.Data()), nil
}

// ack sends a request whose answer is an Ack and checks it.
func (s *session) ack(ctx context.Context, route string, req any) error {
	data, err := s.call(ctx, route, req)
	if err != nil {
		return err
	}
	var a lease.Ack
	if err := json.Unmarshal(data, &a); err != nil || !a.OK {
		return fmt.Errorf("%w: %s answered %.200q", ErrProtocol, route, data)
	}
	return nil
}
