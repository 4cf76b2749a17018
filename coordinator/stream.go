package coordinator

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/flux"

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
	last := sent{renew: s.renewDue, epoch: s.lastEpoch, controls: s.lastControls}
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
	// element runs twice. This first read only asks whether anything is due, without the send
	// log's lock, so that an idle stream costs no lock and a due one can ask for a verified term
	// first. The element that is sent is read again inside sendLog.stamp below, under the lock the
	// leader takes to expire holds: that second read and the record of the send are one step, so
	// a hold the leader sees committed either has this send in the log or can no longer be sent
	// (sendlog.go). Sending what the first read built would break that: the state may have moved
	// between the two reads.
	now := s.n.clock.Now()
	due := false
	s.n.fsm.View(func(st *fsm.State, index uint64) { _, _, due = s.element(st, index, now, last) })
	if !due {
		return false
	}
	if !s.term.canSend(now) {
		s.term.requestVerify() // it wakes every stream once it succeeds
		return false
	}
	var el lease.WireLease
	var controls string
	ok := s.term.sends.stamp(now, func() (memberID, uint64, bool) {
		var ok bool
		s.n.fsm.View(func(st *fsm.State, index uint64) { el, controls, ok = s.element(st, index, now, last) })
		return s.member, el.Epoch, ok
	})
	if !ok {
		return false
	}
	data, err := json.Marshal(el)
	if err != nil {
		s.log.Error().Err(err).Msg("encode lease element")
		return false
	}
	s.mu.Lock()
	s.demand--
	s.renewDue = false
	s.lastEpoch, s.lastControls = el.Epoch, controls
	s.mu.Unlock()
	s.signal("next", func() { sink.Next(payload.New(data, nil)) })
	s.n.metrics.leasesSent.Add(1)
	if el.Epoch != last.epoch {
		s.log.Info().Uint64("epoch", el.Epoch).Int("node_index", el.NodeIndex).Int("node_count", el.NodeCount).
			Interface("ranges", el.Ranges).Msg("lease sent")
	}
	if controls != last.controls {
		s.log.Info().RawJSON("controls", []byte(controls)).Msg("controls sent")
	}
	return false
}

// sent is what the stream sent last, and whether a renewal is due.
type sent struct {
	renew    bool
	epoch    uint64
	controls string
}

// element is the element the stream should send now from the committed state st (at index), with its
// controls as JSON (empty for a client without the feature), and whether one is due: the member
// is active and assigned, and a renewal is due, its epoch changed, or its controls changed. A
// client without the feature gets none while the ring is paused whole: it cannot obey the pause,
// so its lease runs out instead; its tokens stay its own (it is neither down nor expired while
// its connection lives: decideRing), and the renewal that stays due goes out once the pause ends.
func (s *leaseStream) element(st *fsm.State, index uint64, now time.Time, last sent) (lease.WireLease, string, bool) {
	r := st.Ring(s.ring)
	if r == nil {
		return lease.WireLease{}, "", false
	}
	m := r.Members[s.member.Key()]
	if m == nil || !m.Active || !m.Assigned() {
		return lease.WireLease{}, "", false
	}
	l := lease.Lease{
		WorkerID: m.WorkerID, Ring: r.Key, NodeIndex: m.NodeIndex, NodeCount: m.NodeCount,
		Epoch: m.Epoch, Generation: r.Generation, Ranges: m.Ranges,
		TTL: s.n.cfg.Timing.TTL, Renewal: s.n.cfg.Timing.Renewal,
	}
	var controls string
	switch {
	case s.controls:
		share, limited := s.term.shares.share(r, index, s.member.Key(), now)
		l.Controls = wireControls(r.Controls, share, limited)
		b, err := json.Marshal(l.Controls)
		if err != nil {
			return lease.WireLease{}, "", false
		}
		controls = string(b)
	case r.Controls != nil && r.Controls.Paused:
		return lease.WireLease{}, "", false
	}
	if !last.renew && m.Epoch == last.epoch && controls == last.controls {
		return lease.WireLease{}, "", false
	}
	el := lease.Encode(l, now)
	if el.Ranges == nil {
		el.Ranges = []lease.WireRange{}
	}
	return el, controls, true
}

// wireControls are the ring's controls as a member obeys them: the pauses, and its share of the
// rate limit (shareBook.share) when the ring has one (limited), nil otherwise.
func wireControls(c *fsm.Controls, share float64, limited bool) *lease.Controls {
	out := &lease.Controls{PausedImpl: []string{}}
	if c == nil {
		return out
	}
	out.Paused = c.Paused
	out.PausedImpl = append(out.PausedImpl, c.PausedImpl...)
	if limited {
		out.RatePerS = &share
	}
	return out
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
