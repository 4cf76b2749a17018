package leaseclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/lease"
)

// Run connects, follows redirects to the leader, subscribes to the lease stream and keeps the Guard
// fed, reconnecting after every failure where and when the dialPlan says (docs/protocol.md section
// 9). It returns nil after Leave and ctx's error when ctx ends; it can be called once.
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

	plan := newDialPlan(c.cfg.Backoff, c.cfg.Coordinators, c.random.IntN(len(c.cfg.Coordinators)), c.random.Float64)
	next := redial{addr: plan.first()}
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
		if !c.pause(ctx, next.addr, next.delay) {
			select {
			case <-c.stop:
				return nil
			default:
				return ctx.Err()
			}
		}
		got, err := c.runSession(ctx, next.addr)
		select {
		case <-c.stop:
			return nil
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		prev := next.addr
		next = plan.next(attemptResult{addr: prev, err: err, got: got, holding: c.holdsUsableLease()})
		c.stats.reconnects.Add(1)
		if next.redirect {
			c.stats.redirects.Add(1)
			c.log.Info().Str("coordinator_addr", prev).Str("leader_id", next.leaderID).
				Str("leader_addr", next.addr).Msg("following not_leader to the leader")
			continue
		}
		c.log.Warn().Err(err).Str("coordinator_addr", prev).Str("next_addr", next.addr).
			Int64("backoff_ms", next.delay.Milliseconds()).Msg("lease stream ended, reconnecting")
	}
}

// holdsUsableLease reports whether the Guard holds a lease whose end is still ahead on the worker
// clock: what decides the reconnect pacing (dialPlan).
func (c *Client) holdsUsableLease() bool {
	l, ok := c.guard.Current()
	return ok && c.cfg.Clock.Now().Before(l.ExpiresAt())
}

// sleep waits d; false if ctx ended or Leave was called first (Leave's stop is why it is not
// wallclock.Sleep, which ends on ctx alone). It is the default of Client.pause.
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
	return st.gotElement.Load(), sess.withTLSAlert(err)
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
	return c.dialKeepalive(ctx, addr, c.cfg.Keepalive)
}

// dialKeepalive is dial with the KEEPALIVE period keepalive.
func (c *Client) dialKeepalive(ctx context.Context, addr string, keepalive time.Duration) (*session, error) {
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
	dialCtx, dialCancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	sc, err := dialConn(dialCtx, addr, c.cfg.KeepaliveLifetime, c.cfg.TLS, c.cfg.KeepaliveAnswerEvery)
	dialCancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: connecting to %s: %w", ErrDisconnected, addr, readable{err})
	}
	sc.readFailed = sess.readFailed
	sess.conn = sc
	rsctx, rscancel := context.WithCancel(context.WithoutCancel(ctx))
	stopDialCancel := context.AfterFunc(ctx, rscancel)
	sock, err := rsocket.Connect().
		DataMimeType(lease.DataMIME).
		MetadataMimeType(lease.MetadataMIME).
		SetupPayload(payload.New(setup, nil)).
		// KeepAlive sets lifetime = ackTimeout × missedAcks; pass the lifetime whole.
		KeepAlive(keepalive, c.cfg.KeepaliveLifetime, 1).
		ConnectTimeout(c.cfg.DialTimeout).
		OnClose(sess.onClose).
		Transport(predialed(sc)).
		Start(rsctx)
	if !stopDialCancel() {
		if err == nil {
			_ = sock.Close()
		}
		_ = sc.Close()
		rscancel()
		return nil, ctx.Err()
	}
	if err != nil {
		_ = sc.Close()
		rscancel()
		// Under TLS 1.3 a refused client certificate arrives as an alert on the first read, which
		// can close the connection while Start still writes SETUP: the alert says why.
		return nil, sess.withTLSAlert(fmt.Errorf("%w: connecting to %s: %w", ErrDisconnected, addr, readable{err}))
	}
	sess.sock, sess.cancel = sock, rscancel
	return sess, nil
}
