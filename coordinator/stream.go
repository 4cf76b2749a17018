package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/flux"

	"github.com/retryring/retryring/coordinator/leader"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// maxDemand caps the demand a client may announce (REQUEST_N up to 2^31-1 repeatedly).
const maxDemand = 1 << 40

// leaseStream is one ring.leases subscription on the leader. Its producer goroutine is the only
// one that touches the sink; it sends an element only when the client has demand outstanding and
// either the renewal tick asked for one, or the member's committed epoch differs from the last one
// sent, or (to a client that announced lease.FeatureControls) the ring's controls as this member
// obeys them differ from the last ones sent, its share of the rate limit included: that share
// moves with the reports too (share.go), so a report that changes it wakes the ring's streams. A client without the feature gets nothing while its
// ring is paused whole: its renewal stays due, and is answered as soon as the pause ends.
// rsocket-go gives flux.Create the server's context, not one per stream, so the producer
// stops when the stream ends, never on that context: on cancel (the client's, or rsocket-go's when
// the connection closes) and after it signalled the end itself.
//
// The end is observed with DoOnCancel, not DoFinally: reactor-go pools DoFinally's subscriber and
// disposes it on cancel while rsocket-go may still be making the stream's first Request from its
// scheduler (a client that cancels at once trips the race detector there). The cancel hook also
// takes sinkMu, so that the sink's queue is never disposed while the producer is inside Next
// (reactor-go has panicked with "send on closed channel" there).
type leaseStream struct {
	n      *Node
	term   *leaderTerm
	conn   *workerConn
	member memberID
	ring   lease.RingKey
	log    zerolog.Logger
	// controls: the client announced lease.FeatureControls; every element carries them.
	controls bool

	wake     chan struct{}
	done     chan struct{}
	doneOnce sync.Once

	sinkMu    sync.Mutex // held around every call into the sink
	cancelled bool       // under sinkMu

	mu           sync.Mutex
	sink         flux.Sink
	demand       int64
	renewDue     bool
	lastEpoch    uint64 // epoch of the last element sent; 0 before the first
	lastControls string // JSON of the controls of the last element sent
	left         bool   // the worker left: send nothing more
	terminal     *terminal

	// releaseSlot gives the stream's place under --max-streams-per-ring back (limits.go).
	releaseSlot func()
}

type terminal struct{ err error } // err nil: complete

func newLeaseStream(n *Node, t *leaderTerm, c *workerConn) *leaseStream {
	return &leaseStream{
		n: n, term: t, conn: c, member: c.member, ring: c.setup.Ring(), controls: c.setup.Has(lease.FeatureControls),
		log:  c.connLog(n.partLog("lease_stream")),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// flux builds the stream's publisher; the producer starts when rsocket-go subscribes to it.
func (s *leaseStream) flux() flux.Flux {
	raw := flux.Create(func(_ context.Context, sink flux.Sink) {
		s.mu.Lock()
		s.sink = sink
		s.mu.Unlock()
		go s.run()
		s.poke(false)
	}).DoOnRequest(func(n int) {
		s.mu.Lock()
		s.demand = min(s.demand+int64(n), maxDemand)
		s.mu.Unlock()
		s.poke(false)
	}).Raw().DoOnCancel(func() {
		s.sinkMu.Lock()
		s.cancelled = true
		s.sinkMu.Unlock()
		s.finish()
	})
	return flux.Raw(raw)
}

// signal runs fn on the sink unless the stream was cancelled; it reports whether it ran.
func (s *leaseStream) signal(what string, fn func()) bool {
	s.sinkMu.Lock()
	defer s.sinkMu.Unlock()
	if s.cancelled {
		return false
	}
	guard(s.log, what, fn)
	return true
}

// poke wakes the producer; with renew it answers outstanding demand even without a new epoch.
func (s *leaseStream) poke(renew bool) {
	if renew {
		s.mu.Lock()
		s.renewDue = true
		s.mu.Unlock()
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// terminate ends the stream with err (nil: complete) from the producer goroutine.
func (s *leaseStream) terminate(err error) {
	s.mu.Lock()
	if s.terminal == nil {
		s.terminal = &terminal{err: err}
	}
	s.mu.Unlock()
	s.poke(false)
}

// markLeft stops every send while the worker leaves (false undoes it when the leave failed).
func (s *leaseStream) markLeft(left bool) {
	s.mu.Lock()
	s.left = left
	s.mu.Unlock()
}

func (s *leaseStream) hasLeft() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left
}

func (s *leaseStream) finish() {
	s.doneOnce.Do(func() {
		close(s.done)
		s.term.removeStream(s)
		if s.releaseSlot != nil {
			s.releaseSlot()
		}
		s.mu.Lock()
		left := s.left
		s.mu.Unlock()
		s.conn.mu.Lock()
		delete(s.conn.streams, s)
		if len(s.conn.streams) == 0 && !left {
			s.conn.ended = true
		}
		s.conn.mu.Unlock()
		s.n.connsChanged()
	})
}

func (s *leaseStream) run() {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Interface("panic", r).Msg("lease stream producer panicked")
			s.conn.close()
		}
	}()
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		if s.step() {
			return
		}
	}
}

// step sends at most one element; it reports whether the stream reached its end.
func (s *leaseStream) step() (ended bool) {
	s.mu.Lock()
	sink, demand, left, term := s.sink, s.demand, s.left, s.terminal
	last := leader.Sent{Renew: s.renewDue, Epoch: s.lastEpoch, Controls: s.lastControls}
	s.mu.Unlock()
	if sink == nil {
		return false
	}
	if term != nil {
		s.signal("terminate", func() {
			if term.err != nil {
				sink.Error(wireFailure(term.err))
			} else {
				sink.Complete()
			}
		})
		s.finish()
		return true
	}
	if demand <= 0 || left {
		return false
	}
	if err := s.n.stillAuthorized(s.conn); err != nil {
		s.signal("terminate", func() { sink.Error(wireFailure(err)) })
		s.finish()
		s.revoked(err)
		return true
	}
	// The send decision (leader.Element) runs twice, and must. This first read only asks
	// whether anything is due, without the send log's lock, so that an idle stream costs no lock
	// and a due one can ask for a proof of leadership first. The element that is sent is decided
	// again inside sendLog.stamp below, under the lock the reconcile pass copies the log under:
	// that second decision and the record of its send are one step, so a hold the pass sees
	// committed either has this send in its copy or can no longer be sent (sendlog.go). Sending
	// what the first read built would break that: the state may have moved between the two reads.
	now := s.n.clock.Now()
	until := s.term.sendsUntil()
	var d leader.Send
	due := false
	s.n.fsm.View(func(st *fsm.State, index uint64) { d, due = s.element(st, index, now, last, until) })
	if !due {
		return false
	}
	if d.Check(now) != nil {
		s.term.requestVerify() // it wakes every stream once it succeeds
		return false
	}
	ok := s.term.sends.stamp(now, func() (memberID, uint64, bool) {
		var ok bool
		s.n.fsm.View(func(st *fsm.State, index uint64) { d, ok = s.element(st, index, now, last, until) })
		return s.member, d.Element.Epoch, ok
	})
	if !ok {
		return false
	}
	s.send(sink, d, last)
	return false
}

// send writes the decided element d; last is what was sent before it. An element found past its
// write-by at the write is not written: the demand it would have answered and what was due stay
// for the next proof, which it asks for. The send log keeps its stamp, which only makes an expiry
// wait longer.
func (s *leaseStream) send(sink flux.Sink, d leader.Send, last leader.Sent) {
	el := d.Element
	data, err := json.Marshal(el)
	if err != nil {
		s.log.Error().Err(err).Msg("encode lease element")
		return
	}
	s.mu.Lock()
	s.demand--
	s.renewDue = false
	s.lastEpoch, s.lastControls = el.Epoch, d.Controls
	s.mu.Unlock()
	var late error
	s.signal("next", func() { late = writeBefore(s.n.clock, d, func() { sink.Next(payload.New(data, nil)) }) })
	if late != nil {
		s.mu.Lock()
		s.demand = min(s.demand+1, maxDemand)
		s.renewDue = s.renewDue || last.Renew
		s.lastEpoch, s.lastControls = last.Epoch, last.Controls
		s.mu.Unlock()
		s.log.Warn().Err(late).Msg("lease element not written")
		s.term.requestVerify()
		return
	}
	s.n.metrics.leasesSent.Add(1)
	if el.Epoch != last.Epoch {
		s.log.Info().Uint64("epoch", el.Epoch).Int("node_index", el.NodeIndex).Int("node_count", el.NodeCount).
			Interface("ranges", el.Ranges).Msg("lease sent")
	}
	if d.Controls != last.Controls {
		s.log.Info().RawJSON("controls", []byte(d.Controls)).Msg("controls sent")
	}
}

// writeBefore calls write unless d's write-by has passed by clock, read right before: nothing
// but this comparison stands between the clock reading and the write (the caller holds the
// sink's lock), so "written before the proof of leadership ended" is true of the write itself.
func writeBefore(clock lease.Clock, d leader.Send, write func()) error {
	if err := d.Check(clock.Now()); err != nil {
		return err
	}
	write()
	return nil
}

// element is leader.Element for this stream on the committed state st (at index), with the
// member's share of its ring's rate limit from the term's share book (share.go), which moves
// with the members' reports.
func (s *leaseStream) element(st *fsm.State, index uint64, now time.Time, last leader.Sent, writeBy time.Time) (leader.Send, bool) {
	r := st.Ring(s.ring)
	var share leader.Share
	if r != nil && s.controls {
		share.PerSecond, share.Limited = s.term.shares.share(r, index, s.member.Key(), now)
	}
	stream := leader.Stream{Member: s.member, Ring: s.ring, Controls: s.controls, TTL: s.n.cfg.Timing.TTL, Renewal: s.n.cfg.Timing.Renewal}
	return leader.Element(r, stream, share, last, now, writeBy)
}

// guard runs fn and turns a panic into a log line: reactor-go's sink has panicked with "send on
// closed channel" when a stream was cancelled during Next.
func guard(log zerolog.Logger, what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			log.Warn().Str("op", what).Interface("panic", r).Msg("recovered panic in rsocket sink")
		}
	}()
	fn()
}
