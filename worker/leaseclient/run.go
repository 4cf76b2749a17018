package leaseclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/lease"
)

// maxRedirects bounds how many not_leader hints in a row are followed without a lease element in
// between; then the client backs off, so that two nodes naming each other cannot make it spin.
const maxRedirects = 4

// Run connects, follows redirects to the leader, subscribes to the lease stream and keeps the Guard
// fed, reconnecting with backoff after every failure. It returns nil after Leave and ctx's error
// when ctx ends; it can be called once.
func (c *Client) Run(ctx context.Context) error {
	if c.isLeaving() {
		return ErrClosed
	}
	if !c.started.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer close(c.runDone)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		c.rel.run(ctx)
	}()
	go func() {
		defer wg.Done()
		c.rep.run(ctx)
	}()
	go func() { // Leave interrupts a dial or a request in flight
		defer wg.Done()
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()

	coords := c.cfg.Coordinators
	next := rand.IntN(len(coords))
	attempt, redirects := 0, 0
	target := ""
	for {
		if c.isLeaving() {
			// Leave is sending ring.leave; the coordinator may already have ended the stream.
			// Connect to nothing until Leave closes stop.
			select {
			case <-c.stop:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		addr := target
		if addr == "" {
			addr = coords[next%len(coords)]
			next++
		}
		target = ""
		got, err := c.runSession(ctx, addr)
		select {
		case <-c.stop:
			return nil
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if got {
			attempt, redirects = 0, 0
		}
		if leaderID, leaderAddr, ok := redirectTarget(err); ok && redirects < maxRedirects {
			redirects++
			c.stats.redirects.Add(1)
			c.stats.reconnects.Add(1)
			c.log.Info().Str("coordinator_addr", addr).Str("leader_id", leaderID).
				Str("leader_addr", leaderAddr).Msg("following not_leader to the leader")
			target = leaderAddr
			continue
		}
		redirects = 0
		last, held := c.guard.Current()
		d := c.cfg.Backoff.reconnectDelay(attempt, rand.Float64(), last, held, c.cfg.Clock.Now())
		attempt++
		c.log.Warn().Err(err).Str("coordinator_addr", addr).Int64("backoff_ms", d.Milliseconds()).
			Msg("lease stream ended, reconnecting")
		if !c.sleep(ctx, d) {
			select {
			case <-c.stop:
				return nil
			default:
				return ctx.Err()
			}
		}
		c.stats.reconnects.Add(1)
	}
}

// sleep waits d; false if ctx ended or Leave was called first.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-c.stop:
		return false
	}
}

// runSession runs one connection until it fails, ctx ends or Leave stops it. got tells whether any
// lease element arrived on it.
func (c *Client) runSession(ctx context.Context, addr string) (got bool, err error) {
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sess, err := c.dial(sctx, addr)
	if err != nil {
		return false, err
	}
	c.stats.connects.Add(1)
	if !c.setSession(sess) {
		sess.close()
		return false, ErrClosed
	}
	defer func() {
		c.clearSession(sess)
		sess.close()
	}()
	c.rel.wake() // a release that failed on the previous connection goes out on this one
	c.log.Debug().Str("coordinator_addr", addr).Msg("connected")

	st := newLeaseStream(c, sess)
	req, err := json.Marshal(lease.LeasesRequest{WorkerID: c.cfg.WorkerID})
	if err != nil {
		return false, fmt.Errorf("leaseclient: encoding the leases request: %w", err)
	}
	if err := subscribe(sctx, sess, payload.New(req, c.routes[lease.RouteLeases]), st); err != nil {
		return false, err
	}

	select {
	case <-st.done:
		err = st.result()
		if c.isLeaving() {
			// The coordinator completes the stream as soon as it committed the leave, and the
			// COMPLETE may overtake the answer to ring.leave: keep the connection until Leave has
			// its answer (it closes stop), or the connection ends by itself.
			select {
			case <-c.stop:
				err = nil
			case <-sess.closed:
			case <-ctx.Done():
			}
		}
	case <-sess.closed:
		err = sess.err()
		if st.finished() {
			if serr := st.result(); !errors.Is(serr, ErrDisconnected) {
				err = serr // the coordinator's own reason beats "connection closed"
			}
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.stop:
		err = nil
	}
	return st.gotElement.Load(), err
}

// subscribe opens the lease stream. If the connection closes between SETUP and this call,
// reactor-go's processor closes its "subscribed" channel twice and panics; that is a lost
// connection, not a crash.
func subscribe(ctx context.Context, sess *session, req payload.Payload, st *leaseStream) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s closed while subscribing (%v)", ErrDisconnected, sess.addr, r)
			st.finish(err)
		}
	}()
	sess.sock.RequestStream(req).SubscribeWith(ctx, st) // st.demand sends REQUEST_STREAM through sess.send
	return nil
}

// dial opens a connection and sends SETUP. rsocket-go does not wait for an answer: a REJECTED_SETUP
// arrives later through the session's close callback.
func (c *Client) dial(ctx context.Context, addr string) (*session, error) {
	setup, err := json.Marshal(lease.Setup{
		WorkerID: c.cfg.WorkerID, Incarnation: c.cfg.Incarnation,
		Region: c.cfg.Ring.Region, Cluster: c.cfg.Ring.Cluster, Service: c.cfg.Ring.Service,
		Token: c.cfg.Token, Features: []string{lease.FeatureControls},
	})
	if err != nil {
		return nil, fmt.Errorf("leaseclient: encoding SETUP: %w", err)
	}
	sess := &session{addr: addr, routes: c.routes, closed: make(chan struct{})}
	// rsocket-go closes the connection by itself when the context given to Start ends, without the
	// session's send lock (see session.sendMu). So Start gets a context that only ends after
	// session.close; ctx may interrupt the dial, not the connection.
	rsctx, rscancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDialCancel := context.AfterFunc(ctx, rscancel)
	sock, err := rsocket.Connect().
		DataMimeType(lease.DataMIME).
		MetadataMimeType(lease.MetadataMIME).
		SetupPayload(payload.New(setup, nil)).
		// KeepAlive sets lifetime = ackTimeout × missedAcks; pass the lifetime whole.
		KeepAlive(c.cfg.Keepalive, c.cfg.KeepaliveLifetime, 1).
		ConnectTimeout(c.cfg.DialTimeout).
		OnClose(sess.onClose).
		Transport(tcpTransport(addr, c.cfg.KeepaliveLifetime, func(sc *silenceConn) { sc.readFailed = sess.readFailed })).
		Start(rsctx)
	if !stopDialCancel() {
		if err == nil {
			_ = sock.Close()
		}
		rscancel()
		return nil, ctx.Err()
	}
	if err != nil {
		rscancel()
		return nil, fmt.Errorf("%w: connecting to %s: %w", ErrDisconnected, addr, err)
	}
	sess.sock, sess.cancel = sock, rscancel
	return sess, nil
}
