package coordinator

import (
	"context"
	"encoding/json"
	"sync"

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
// either the renewal tick asked for one or the member's committed epoch differs from the last one
// sent. rsocket-go gives flux.Create the server's context, not one per stream, so the producer
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

	wake     chan struct{}
	done     chan struct{}
	doneOnce sync.Once

	sinkMu    sync.Mutex // held around every call into the sink
	cancelled bool       // under sinkMu

	mu        sync.Mutex
	sink      flux.Sink
	demand    int64
	renewDue  bool
	lastEpoch uint64 // epoch of the last element sent; 0 before the first
	left      bool   // the worker left: send nothing more
	terminal  *terminal
}

type terminal struct{ err error } // err nil: complete

func newLeaseStream(n *Node, t *leaderTerm, c *workerConn) *leaseStream {
	return &leaseStream{
		n: n, term: t, conn: c, member: c.member, ring: c.setup.Ring(),
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
	sink, demand, renew, lastEpoch, left, term := s.sink, s.demand, s.renewDue, s.lastEpoch, s.left, s.terminal
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
	want := func(m *fsm.Member) bool {
		return m != nil && m.Active && m.Assigned() && (renew || m.Epoch != lastEpoch)
	}
	if !want(s.committedMember()) {
		return false
	}
	now := s.n.clock.Now()
	if !s.term.canSend(now) {
		s.term.requestVerify() // it wakes every stream once it succeeds
		return false
	}
	var el lease.WireLease
	sent := s.term.sends.stamp(now, func() (memberID, uint64, bool) {
		var epoch uint64
		ok := false
		s.n.fsm.View(func(st *fsm.State, _ uint64) {
			r := st.Ring(s.ring)
			if r == nil {
				return
			}
			m := r.Members[s.member.key()]
			if !want(m) {
				return
			}
			el = lease.Encode(lease.Lease{
				WorkerID: m.WorkerID, Ring: r.Key, NodeIndex: m.NodeIndex, NodeCount: m.NodeCount,
				Epoch: m.Epoch, Generation: r.Generation, Ranges: m.Ranges,
				TTL: s.n.cfg.Timing.TTL, Renewal: s.n.cfg.Timing.Renewal,
			}, now)
			epoch, ok = m.Epoch, true
		})
		return s.member, epoch, ok
	})
	if !sent {
		return false
	}
	if el.Ranges == nil {
		el.Ranges = []lease.WireRange{}
	}
	data, err := json.Marshal(el)
	if err != nil {
		s.log.Error().Err(err).Msg("encode lease element")
		return false
	}
	s.mu.Lock()
	s.demand--
	s.renewDue = false
	s.lastEpoch = el.Epoch
	s.mu.Unlock()
	s.signal("next", func() { sink.Next(payload.New(data, nil)) })
	s.n.metrics.leasesSent.Add(1)
	if el.Epoch != lastEpoch {
		s.log.Info().Uint64("epoch", el.Epoch).Int("node_index", el.NodeIndex).Int("node_count", el.NodeCount).
			Interface("ranges", el.Ranges).Msg("lease sent")
	}
	return false
}

func (s *leaseStream) committedMember() *fsm.Member {
	var out *fsm.Member
	s.n.fsm.View(func(st *fsm.State, _ uint64) {
		if r := st.Ring(s.ring); r != nil {
			if m := r.Members[s.member.key()]; m != nil {
				mm := *m
				out = &mm
			}
		}
	})
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
