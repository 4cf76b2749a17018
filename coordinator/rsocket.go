package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/core/transport"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// serveRSocket runs the worker-facing server until ctx is cancelled, which closes the listener and
// every connection.
func (n *Node) serveRSocket(ctx context.Context) {
	err := rsocket.Receive().
		Acceptor(n.accept).
		Transport(func(context.Context) (transport.ServerTransport, error) {
			return transport.NewTCPServerTransport(func(context.Context) (net.Listener, error) {
				return n.rsListener, nil
			}), nil
		}).
		Serve(ctx)
	if err != nil && ctx.Err() == nil {
		n.log.Error().Err(err).Msg("rsocket server stopped")
	}
}

// appError is an RSocket error frame whose data is a lease.WireError as JSON. Error() is the JSON
// too, because rsocket-go sends Error() as the data of REJECTED_SETUP.
type appError struct{ body []byte }

func (e *appError) Error() string                { return string(e.body) }
func (e *appError) ErrorCode() rsocket.ErrorCode { return rsocket.ErrorCodeApplicationError }
func (e *appError) ErrorData() []byte            { return e.body }

// wireFailure maps err to the catalog's JSON body (lease.ToWire) as an RSocket error.
func wireFailure(err error) error {
	we := lease.ToWire(err)
	body, mErr := json.Marshal(we)
	if mErr != nil {
		body = []byte(`{"error":"internal"}`)
	}
	return &appError{body: body}
}

// accept handles SETUP. Every node accepts a valid SETUP (followers answer requests with
// not_leader instead of refusing the connection, which rsocket-go's client would only see in its
// OnClose); an invalid one is REJECTED_SETUP with bad_setup. It recovers: a malformed SETUP frame
// can panic inside rsocket-go's accessors, and the acceptor runs outside any recover of theirs.
func (n *Node) accept(_ context.Context, setup payload.SetupPayload, sock rsocket.CloseableRSocket) (responder rsocket.RSocket, err error) {
	if remote, ok := rsocket.GetAddr(sock); ok {
		// This node logs what it does with the SETUP: the connection's close needs no line.
		n.limits.explain(remote)
	}
	defer func() {
		if r := recover(); r != nil {
			n.log.Warn().Interface("panic", r).Msg("malformed SETUP refused")
			responder, err = nil, wireFailure(&lease.WireError{Code: lease.CodeBadSetup, Message: "malformed SETUP frame"})
		}
	}()
	s, err := parseSetup(setup)
	if err != nil {
		n.log.Info().Err(err).Msg("SETUP refused")
		return nil, wireFailure(err)
	}
	adm, err := n.admitSetup(&s, sock)
	if err != nil {
		n.refusalLog.Info().Err(err).Str("worker_id", s.WorkerID).Str("ring", s.Ring().String()).Msg("SETUP refused")
		return nil, wireFailure(err)
	}
	c := &workerConn{
		id: n.conns.nextID.Add(1), setup: s, member: newMemberID(s), socket: sock,
		streams: map[*leaseStream]struct{}{}, admission: adm,
	}
	if remote, ok := rsocket.GetAddr(sock); ok {
		c.closeConn = func() bool { return n.rsListener.closeRemote(remote) }
	}
	c.log = c.connLog(n.partLog("worker_conn"))
	sock.OnClose(func(error) { n.connClosed(c) })
	if old := n.conns.add(c); old != nil {
		old.log.Info().Uint64("new_conn_id", c.id).Msg("connection replaced by a newer one of the same worker")
		old.close()
	}
	c.log.Debug().Msg("worker connected")
	return n.responder(c), nil
}

func parseSetup(p payload.SetupPayload) (lease.Setup, error) {
	bad := func(format string, args ...any) (lease.Setup, error) {
		return lease.Setup{}, &lease.WireError{Code: lease.CodeBadSetup, Message: fmt.Sprintf(format, args...)}
	}
	if m := p.DataMimeType(); m != lease.DataMIME {
		return bad("data MIME type %q, want %q", m, lease.DataMIME)
	}
	if m := p.MetadataMimeType(); m != lease.MetadataMIME {
		return bad("metadata MIME type %q, want %q", m, lease.MetadataMIME)
	}
	var s lease.Setup
	if err := json.Unmarshal(p.Data(), &s); err != nil {
		return bad("SETUP data is not a JSON object: %v", err)
	}
	if err := s.Validate(); err != nil {
		return bad("%v", err)
	}
	return s, nil
}

// connClosed runs when rsocket-go closes a connection (EOF, silence, error, or our own close).
// The leader's reconcile loop commits Down for the member if this was its current connection.
func (n *Node) connClosed(c *workerConn) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	for _, s := range c.streamList() {
		s.terminate(lease.ErrUnavailable)
	}
	if n.conns.remove(c) {
		c.log.Info().Msg("worker connection closed")
	}
}

func (n *Node) responder(c *workerConn) rsocket.RSocket {
	return rsocket.NewAbstractSocket(
		rsocket.RequestResponse(func(p payload.Payload) (m mono.Mono) {
			defer func() {
				if r := recover(); r != nil {
					c.log.Error().Interface("panic", r).Msg("request-response handler panicked")
					m = mono.Error(wireFailure(lease.ErrInternal))
				}
			}()
			return n.requestResponse(c, p)
		}),
		rsocket.RequestStream(func(p payload.Payload) (f flux.Flux) {
			defer func() {
				if r := recover(); r != nil {
					c.log.Error().Interface("panic", r).Msg("request-stream handler panicked")
					f = flux.Error(wireFailure(lease.ErrInternal))
				}
			}()
			return n.requestStream(c, p)
		}),
		// No route is fire-and-forget, metadata-push or a channel: ignore the first two (they have no
		// answer to carry an error) and refuse the third.
		rsocket.FireAndForget(func(payload.Payload) {}),
		rsocket.MetadataPush(func(payload.Payload) {}),
		rsocket.RequestChannel(func(flux.Flux) flux.Flux {
			return flux.Error(wireFailure(fmt.Errorf("%w: request-channel is not part of the protocol", lease.ErrUnknownRoute)))
		}),
	)
}

// request is a parsed request: its route and a copy of its data (payload buffers are pooled).
type request struct {
	route string
	data  []byte
}

func parseRequest(p payload.Payload) (request, error) {
	md, _ := p.Metadata()
	route, err := routeOf(md)
	if err != nil {
		return request{}, err
	}
	return request{route: route, data: bytes.Clone(p.Data())}, nil
}

// decode reads JSON request data into v; empty data is an empty object.
func (r request) decode(v any) error {
	if len(bytes.TrimSpace(r.data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.data, v); err != nil {
		return fmt.Errorf("%w: %s data: %w", lease.ErrBadRequest, r.route, err)
	}
	return nil
}

func checkWorker(c *workerConn, workerID string, required bool) error {
	if workerID == "" && !required {
		return nil
	}
	if workerID != c.setup.WorkerID {
		return fmt.Errorf("%w: worker_id %q does not match SETUP's %q", lease.ErrBadRequest, workerID, c.setup.WorkerID)
	}
	return nil
}

func (n *Node) requestResponse(c *workerConn, p payload.Payload) mono.Mono {
	// A connection whose token was revoked since its SETUP writes nothing more (a release or a
	// leave is a Raft entry) and reads nothing either; its lease stream ends at its next element.
	if err := n.stillAuthorized(c); err != nil {
		n.metrics.refused(refusedRevoked)
		return mono.Error(wireFailure(err))
	}
	req, err := parseRequest(p)
	if err != nil {
		return mono.Error(wireFailure(err))
	}
	var do func() (any, error)
	switch req.route {
	case lease.RouteRelease:
		var body lease.ReleaseRequest
		if err := req.decode(&body); err != nil {
			return mono.Error(wireFailure(err))
		}
		if err := checkWorker(c, body.WorkerID, true); err != nil {
			return mono.Error(wireFailure(err))
		}
		do = func() (any, error) { return n.release(c, body.Epoch) }
	case lease.RouteLeave:
		var body lease.LeaveRequest
		if err := req.decode(&body); err != nil {
			return mono.Error(wireFailure(err))
		}
		if err := checkWorker(c, body.WorkerID, true); err != nil {
			return mono.Error(wireFailure(err))
		}
		do = func() (any, error) { return n.leave(c) }
	case lease.RouteView:
		do = func() (any, error) { return n.View(), nil }
	case lease.RouteReport:
		var body lease.Report
		err := req.decode(&body)
		if err == nil {
			err = checkWorker(c, body.WorkerID, true)
		}
		if err == nil {
			err = body.Validate()
		}
		if err != nil {
			return mono.Error(wireFailure(err))
		}
		do = func() (any, error) { return n.report(c, body) }
	case lease.RouteLeases:
		return mono.Error(wireFailure(fmt.Errorf("%w: %s is a request-stream", lease.ErrBadRequest, req.route)))
	default:
		return mono.Error(wireFailure(fmt.Errorf("%w: %q", lease.ErrUnknownRoute, req.route)))
	}
	if n.currentTerm() == nil {
		return mono.Error(wireFailure(n.redirect()))
	}
	return mono.Create(func(_ context.Context, sink mono.Sink) {
		// Commits block for a round trip or more: never in rsocket-go's dispatch goroutines.
		go func() {
			defer func() {
				if r := recover(); r != nil {
					c.log.Error().Interface("panic", r).Str("route", req.route).Msg("request handler panicked")
					sink.Error(wireFailure(lease.ErrInternal))
				}
			}()
			v, err := do()
			if err != nil {
				sink.Error(wireFailure(err))
				return
			}
			b, err := json.Marshal(v)
			if err != nil {
				sink.Error(wireFailure(fmt.Errorf("%w: encode answer: %w", lease.ErrInternal, err)))
				return
			}
			sink.Success(payload.New(b, nil))
		}()
	})
}

// release commits that the worker uses nothing but its lease of epoch, with the leader's next
// pass over the ring, whose plan hands on what older epochs held (leaderTerm.submitRelease).
func (n *Node) release(c *workerConn, epoch uint64) (any, error) {
	s := c.setup
	t := n.currentTerm()
	if t == nil {
		return nil, n.leaderErr()
	}
	err := t.submitRelease(fsm.Release{Ring: s.Ring(), WorkerID: s.WorkerID, Incarnation: s.Incarnation, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	c.log.Info().Uint64("epoch", epoch).Msg("release committed")
	return lease.Ack{OK: true}, nil
}

// leave commits that the worker uses nothing at all; its lease streams then complete. The streams
// are marked first so that the leader does not join the member again in between.
func (n *Node) leave(c *workerConn) (any, error) {
	streams := c.streamList()
	for _, st := range streams {
		st.markLeft(true)
	}
	s := c.setup
	if err := n.apply(&fsm.Leave{Ring: s.Ring(), WorkerID: s.WorkerID, Incarnation: s.Incarnation}); err != nil {
		for _, st := range streams {
			st.markLeft(false)
		}
		n.connsChanged()
		return nil, err
	}
	for _, st := range streams {
		st.terminate(nil)
	}
	c.log.Info().Msg("leave committed")
	return lease.Ack{OK: true}, nil
}

func (n *Node) requestStream(c *workerConn, p payload.Payload) flux.Flux {
	req, err := parseRequest(p)
	if err != nil {
		return flux.Error(wireFailure(err))
	}
	switch req.route {
	case lease.RouteLeases:
	case lease.RouteRelease, lease.RouteLeave, lease.RouteView, lease.RouteReport:
		return flux.Error(wireFailure(fmt.Errorf("%w: %s is a request-response", lease.ErrBadRequest, req.route)))
	default:
		return flux.Error(wireFailure(fmt.Errorf("%w: %q", lease.ErrUnknownRoute, req.route)))
	}
	var body lease.LeasesRequest
	if err := req.decode(&body); err != nil {
		return flux.Error(wireFailure(err))
	}
	if err := checkWorker(c, body.WorkerID, false); err != nil {
		return flux.Error(wireFailure(err))
	}
	t := n.currentTerm()
	if t == nil {
		return flux.Error(wireFailure(n.redirect()))
	}
	if err := n.stillAuthorized(c); err != nil {
		return flux.Error(wireFailure(err))
	}
	release, err := n.limits.acquireStream(c.setup.Ring(), n.clock.Now())
	if err != nil {
		return flux.Error(wireFailure(err))
	}
	defer func() {
		if release != nil {
			release()
		}
	}()
	if n.retired.has(c.member) {
		return flux.Error(wireFailure(supersededError(c.setup)))
	}
	s := newLeaseStream(n, t, c)
	s.releaseSlot = release // idempotent: the deferred call and the stream's end may both run it
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return flux.Error(wireFailure(fmt.Errorf("%w: connection closed", lease.ErrUnavailable)))
	}
	c.streams[s] = struct{}{}
	c.ended = false
	c.mu.Unlock()
	if !t.addStream(s) {
		c.mu.Lock()
		delete(c.streams, s)
		c.mu.Unlock()
		return flux.Error(wireFailure(n.redirect()))
	}
	release = nil    // from here the stream gives its place back when it ends
	n.connsChanged() // the leader joins the member
	return s.flux()
}

// supersededError is what a superseded incarnation's stream ends with: a newer process with its
// worker id joined the ring.
func supersededError(s lease.Setup) *lease.WireError {
	return &lease.WireError{Code: lease.CodeDuplicate,
		Message: fmt.Sprintf("incarnation %s of worker %s was superseded by a newer one", s.Incarnation, s.WorkerID)}
}
