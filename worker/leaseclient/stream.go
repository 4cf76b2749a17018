package leaseclient

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"

	"github.com/retryring/retryring/lease"
)

// firstDemandWait bounds how long OnSubscribe waits for the initial demand to be queued (see
// OnSubscribe). Queueing takes microseconds; the bound only matters when the connection closed.
const firstDemandWait = 250 * time.Millisecond

// leaseStream subscribes to ring.leases on one connection and does the demand accounting.
//
// rsocket-go's stream processor counts demand only after the demand's frame was queued, and
// delivers an element that arrived while the count was zero only when the next element arrives:
// an element that overtook its own demand's count would sit undelivered until the lease ran out.
// So every REQUEST_N is sent synchronously inside OnNext, where the next element cannot overtake
// it (one goroutine dispatches all frames of the stream), and the initial demand completes before
// OnSubscribe returns, before which no element is delivered at all.
type leaseStream struct {
	c    *Client
	sess *session
	addr string

	mu         sync.Mutex
	sub        rx.Subscription
	demandSent time.Time // worker clock when the outstanding demand was asked for

	// reqMu orders every Request before the stream's end (see endRequests); ended is set, under
	// it, once the stream ended: no Request after that.
	reqMu sync.Mutex
	ended bool

	gotElement atomic.Bool
	done       chan struct{}
	doneOnce   sync.Once
	err        error // set once, before done closes
}

func newLeaseStream(c *Client, sess *session) *leaseStream {
	return &leaseStream{c: c, sess: sess, addr: sess.addr, done: make(chan struct{})}
}

// demand records the send time of one element of demand, then asks for it. Reading the clock before
// the frame goes out errs on the safe side: the element's lease ends no later than it may.
func (st *leaseStream) demand() {
	st.reqMu.Lock()
	defer st.reqMu.Unlock()
	if st.ended {
		return
	}
	st.mu.Lock()
	st.demandSent = st.c.cfg.Clock.Now()
	sub := st.sub
	st.mu.Unlock()
	st.sess.send(func() { sub.Request(1) })
}

// endRequests waits until no Request is under way, and stops those to come, before the stream's
// end is delivered. rsocket-go's stream ends through reactor-go's pooled DoFinally subscriber,
// which right after our OnError or OnComplete clears its subscription and goes back to the pool
// (to be handed to another stream); a Request running on another goroutine meanwhile (the
// initial demand, sent from its own goroutine) reads the cleared field: a data race -race
// reports (seen in TestNewIncarnationWaitsForTheOldLease/hang, when the coordinator ended a
// superseded stream with duplicate_connection), and a nil dereference or a demand on someone
// else's stream without it. Demands from OnNext run on the goroutine that delivers the end too,
// so only the initial one can overlap.
//
// The end can also be delivered from inside that initial Request, on its goroutine (OnSubscribe's
// comment says when): the lock is then ours already, so this waits at most firstDemandWait, on
// the wall clock (the worker's clock may be a test's, which does not move by itself), and lets
// the end through, as OnSubscribe does.
func (st *leaseStream) endRequests() {
	deadline := time.Now().Add(firstDemandWait)
	for !st.reqMu.TryLock() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	st.ended = true
	st.reqMu.Unlock()
}

// OnSubscribe sends REQUEST_STREAM with an initial demand of one and waits until it is queued.
//
// The request runs on its own goroutine because, when the connection closes at this very moment,
// rsocket-go errors the stream from inside Request, and delivering that error waits for
// OnSubscribe to return: called from here, Request would wait for itself forever. After
// firstDemandWait OnSubscribe gives up waiting, the error goes through and the session ends.
func (st *leaseStream) OnSubscribe(_ context.Context, s rx.Subscription) {
	defer st.recoverPanic("on_subscribe")
	st.mu.Lock()
	st.sub = s
	st.mu.Unlock()
	if hook := testHookBeforeFirstDemand; hook != nil {
		hook(st.sess)
	}
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		defer st.recoverPanic("first_demand")
		st.demand()
	}()
	wait := time.NewTimer(firstDemandWait)
	defer wait.Stop()
	select {
	case <-queued:
	case <-wait.C:
		st.c.log.Warn().Str("coordinator_addr", st.addr).Msg("initial demand not queued in time; the connection is probably closing")
	}
}

// testHookBeforeFirstDemand, when set by a test, runs in OnSubscribe before the initial demand.
var testHookBeforeFirstDemand func(*session)

// OnNext installs one element and asks for the next. p is valid only during this call.
func (st *leaseStream) OnNext(p payload.Payload) {
	defer st.recoverPanic("on_next")
	if st.finished() {
		return
	}
	var w lease.WireLease
	if err := json.Unmarshal(p.Data(), &w); err != nil {
		st.finish(fmt.Errorf("%w: lease element from %s: %w", ErrProtocol, st.addr, err))
		return
	}
	st.mu.Lock()
	sent := st.demandSent
	st.mu.Unlock()
	l, err := w.Decode(sent)
	if err != nil {
		st.finish(fmt.Errorf("%w: lease element from %s: %w", ErrProtocol, st.addr, err))
		return
	}
	if l.WorkerID != st.c.cfg.WorkerID || l.Ring != st.c.cfg.Ring {
		st.finish(fmt.Errorf("%w: lease element for %s on %s, expected %s on %s",
			ErrProtocol, l.WorkerID, l.Ring, st.c.cfg.WorkerID, st.c.cfg.Ring))
		return
	}
	prev, hadPrev, outcome := st.c.install(l)
	if outcome == installRefusedLeaving {
		return // leaving: no more demand
	}
	st.demand()
	firstHere := !st.gotElement.Swap(true)
	if outcome == installStale {
		st.c.log.Warn().Uint64("epoch", l.Epoch).Uint64("held_epoch", prev.Epoch).Str("coordinator_addr", st.addr).
			Msg("lease element of an older epoch ignored")
		return
	}
	st.c.stats.elements.Add(1)
	if hadPrev && l.Epoch != prev.Epoch {
		st.c.log.Info().Uint64("epoch", l.Epoch).Uint64("old_epoch", prev.Epoch).Uint64("generation", l.Generation).
			Int("node_index", l.NodeIndex).Int("node_count", l.NodeCount).Stringer("ranges", l.Ranges).
			Int64("ttl_ms", l.TTL.Milliseconds()).Int64("renewal_ms", l.Renewal.Milliseconds()).Msg("new lease epoch")
	} else if !hadPrev {
		st.c.log.Info().Uint64("epoch", l.Epoch).Uint64("generation", l.Generation).Int("node_index", l.NodeIndex).
			Int("node_count", l.NodeCount).Stringer("ranges", l.Ranges).Int64("ttl_ms", l.TTL.Milliseconds()).
			Int64("renewal_ms", l.Renewal.Milliseconds()).Msg("first lease")
	}
	if hadPrev && l.Epoch > prev.Epoch && drops(prev, l) {
		st.c.rel.add(prev, l)
	}
	if firstHere || l.Epoch != prev.Epoch {
		st.c.rep.wake()
	}
	st.c.onLease(l)
	st.c.onElement(l, st.addr)
}

// OnError ends the stream with the coordinator's error.
func (st *leaseStream) OnError(err error) {
	st.endRequests()
	st.finish(remoteError(err))
}

// OnComplete ends the stream: the coordinator has nothing more for this connection.
func (st *leaseStream) OnComplete() {
	st.endRequests()
	st.finish(fmt.Errorf("%w: %s completed the lease stream", ErrDisconnected, st.addr))
}

func (st *leaseStream) finish(err error) {
	st.doneOnce.Do(func() {
		st.err = err
		close(st.done)
	})
}

func (st *leaseStream) finished() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// result is the stream's error once done is closed.
func (st *leaseStream) result() error {
	<-st.done
	return st.err
}

func (st *leaseStream) recoverPanic(where string) {
	if r := recover(); r != nil {
		st.c.log.Error().Str("callback", where).Interface("panic", r).Msg("panic in lease stream callback")
		st.finish(fmt.Errorf("%w: panic in %s: %v", ErrProtocol, where, r))
	}
}

// drops reports whether next takes away any token (or Node-0) that prev held.
func drops(prev, next lease.Lease) bool {
	return !prev.Ranges.Subtract(next.Ranges).Empty() || (prev.IsNode0() && !next.IsNode0())
}
