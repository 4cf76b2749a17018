package coordinator

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/coordinator/leader"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/wallclock"
)

// leaderTerm is one stretch of leadership of this node, in one Raft term. It owns what the leader
// alone does: the send log, the right to send (renewed by proveLeadership), the lease streams,
// failure detection, hold expiry and planning. A new term starts from nothing: it knows no send
// time of any earlier leader, so it treats every hold as possibly alive until
// leader.Times.HoldsAliveUntil.
type leaderTerm struct {
	n *Node
	// raftTerm is the Raft term this stretch leads in; a later term is a new stretch
	// (Node.syncLeadership).
	raftTerm uint64
	log      zerolog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	sends    *sendLog
	// reports and backlog are what workers reported to this term (ring.report), for people.
	reports *reportStore
	backlog *backlogHistory
	// shares split the rings' rate limits by the reports (share.go): the leader's view, never
	// committed.
	shares *shareBook

	kick      chan struct{} // wakes the reconcile loop
	verifyNow chan struct{} // asks the verify loop for an extra proof of leadership
	wg        sync.WaitGroup

	mu sync.Mutex
	// caughtUp: the barrier passed, the state holds every earlier entry, so the term may commit
	// (its own registration first). ready: its lease timing is settled too (committed, or the
	// version gate is closed), so it may plan, expire and send.
	caughtUp      bool
	ready         bool
	times         leader.Times
	verifiedUntil time.Time
	streams       map[*leaseStream]struct{}
	// releases wait for the next reconcile pass of their ring (submitRelease).
	releases []*releaseReq

	recent leader.Recent // reconcile loop only: commands committed lately, by encoding
	// reservedSeen is when this term first saw each reserved slot of a minimal-mode ring and each
	// such ring settled (leader.Seen). Reconcile loop only.
	reservedSeen leader.Seen
	// timingCommitted: this term's CommitTiming is in the state (start goroutine, then the
	// reconcile loop).
	timingCommitted bool
	// settleLocal: a new or recovered state whose floor the version gate kept out settles in
	// this term anyway (settle.go). Under mu.
	settleLocal bool
}

func newLeaderTerm(n *Node, raftTerm uint64) *leaderTerm {
	ctx, cancel := context.WithCancel(context.Background())
	reports := newReportStore(n.cfg.ReportPeriod)
	return &leaderTerm{
		n: n, raftTerm: raftTerm, log: n.partLog("leader").With().Uint64("raft_term", raftTerm).Logger(),
		ctx: ctx, cancel: cancel, sends: newSendLog(),
		reports: reports, backlog: newBacklogHistory(n.cfg.ReportPeriod), shares: newShareBook(reports),
		kick: make(chan struct{}, 1), verifyNow: make(chan struct{}, 1),
		streams: map[*leaseStream]struct{}{}, recent: leader.Recent{},
	}
}

func (t *leaderTerm) start() {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if !t.barrier() || !t.settleTiming() {
			return
		}
		t.wg.Add(3)
		go func() { defer t.wg.Done(); t.verifyLoop() }()
		go func() { defer t.wg.Done(); t.reconcileLoop() }()
		go func() { defer t.wg.Done(); t.sampleLoop() }()
	}()
}

// barrier waits until every entry of earlier terms is applied here, then records the election
// time. Nothing is planned, expired or sent before: the state could still miss committed entries.
func (t *leaderTerm) barrier() bool {
	for {
		err := t.n.awaitFuture(t.n.raft.Barrier(t.n.cfg.ApplyTimeout))
		if err == nil && !t.stillLeads() {
			t.endStale("barrier committed in a later raft term")
			return false
		}
		if err == nil {
			break
		}
		t.log.Warn().Err(err).Msg("barrier failed")
		if !wallclock.Sleep(t.ctx, 50*time.Millisecond) {
			return false
		}
	}
	now := t.n.clock.Now()
	cfg := t.n.cfg
	t.mu.Lock()
	t.times = leader.Times{
		ElectedAt:      now,
		LeaderLease:    cfg.LeaderLeaseTimeout,
		HolderBound:    cfg.Timing.HolderBound(),
		InheritedBound: cfg.Timing.HolderBound(),
		GraceEnd:       now.Add(cfg.SilenceTimeout).Add(cfg.ReconnectGrace),
	}
	t.caughtUp = true
	t.mu.Unlock()
	t.n.kickRegister()
	return true
}

// ownTiming is the timing this leader runs with, as the state records it.
func (t *leaderTerm) ownTiming() fsm.LeaseTiming {
	return fsm.NewLeaseTiming(t.n.cfg.NodeID, t.n.cfg.Timing)
}

// settleTiming commits the lease timing this leader runs with before it sends anything (a later
// leader learns from the state how long this one's leases may live), then bounds the leases of
// earlier leaders by the longest timing committed, and makes the term ready. It reports false
// when the term ended first.
//
// The version gate may refuse the commit: a server registered FSM version 1 (a rolling upgrade
// from it: the leader goes on as version 1 did, bounding earlier leases by its own timing and
// the longest committed one, if any), or has not registered yet (a new cluster, whose other
// nodes register right after this leader did: it waits for them up to ReconnectGrace).
func (t *leaderTerm) settleTiming() bool {
	own := t.ownTiming()
	waitUntil := t.n.clock.Now().Add(t.n.cfg.ReconnectGrace)
	for {
		err := t.apply(&fsm.CommitTiming{Timing: own})
		if err == nil {
			t.timingCommitted = true
			break
		}
		if errors.Is(err, ErrUpgradeIncomplete) && (t.n.anyRegisteredBelow(fsm.TypeCommitTiming.Since()) || !t.n.clock.Now().Before(waitUntil)) {
			t.log.Warn().Err(err).Msg("lease timing not replicated: a later leader with a shorter TTL cannot bound this leader's leases until every coordinator runs FSM version 2")
			break
		}
		if !wallclock.Sleep(t.ctx, 50*time.Millisecond) {
			return false
		}
	}
	if !t.settleFloor() {
		return false
	}
	var longest time.Duration
	t.n.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Timing != nil {
			longest = s.Timing.Longest.HolderBound()
		}
	})
	t.mu.Lock()
	t.times.InheritedBound = max(t.times.HolderBound, longest)
	t.ready = true
	times := t.times
	t.mu.Unlock()
	t.log.Info().Time("elected_at", times.ElectedAt).Dur("holder_bound", times.HolderBound).
		Dur("inherited_holder_bound", times.InheritedBound).Bool("timing_committed", t.timingCommitted).Msg("leader ready")
	return true
}

// stop ends the term: nothing more is sent; when graceful, every lease stream gets err (not_leader
// or no_leader) and every worker connection is closed shortly after, so that workers go to the new
// leader instead of waiting on this node.
func (t *leaderTerm) stop(graceful bool, err error) {
	t.cancel()
	t.mu.Lock()
	streams := make([]*leaseStream, 0, len(t.streams))
	for s := range t.streams {
		streams = append(streams, s)
	}
	t.streams = map[*leaseStream]struct{}{}
	t.mu.Unlock()
	if !graceful {
		return
	}
	for _, s := range streams {
		s.terminate(err)
	}
	conns := t.n.conns.snapshot()
	go func() {
		// Give the error frames a moment to leave before the connections close.
		time.Sleep(100 * time.Millisecond)
		for _, c := range conns {
			c.close()
		}
	}()
}

// isReady reports whether the term may plan, commit what operators ask and send.
func (t *leaderTerm) isReady() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready && t.ctx.Err() == nil
}

// canSend reports whether an element may be written at now: now is before t0 + LeaderLeaseTimeout
// for a t0 taken before the proposal of an entry of this term that a quorum stored (a proof of
// leadership, or any command this leader committed). Why that is safe: a newer leader only waits
// electedAt + LeaderLeaseTimeout + HolderBound before it moves ranges. A voter stores an entry of
// this term only while its own term is this one; once it votes in a later term it refuses this
// leader's entries. So each member of the quorum that stored the entry voted for any newer leader,
// if at all, after storing it, and every quorum that elects a newer leader has such a member: the
// newer leader was elected after t0, and every element sent before t0 + LeaderLeaseTimeout is
// covered by its wait. An acknowledgement alone proves nothing of the kind: Raft's VerifyLeader
// counts any answer it processes after the check registered, including one to a heartbeat sent
// before t0 and delivered up to the transport timeout later, from a follower that has voted for
// a newer leader since (issue 16, hole 3). A stream checks it before it decides to send, and
// checks the end of the proof it decided under (sendsUntil, carried as leader.Send.WriteBy)
// again just before the write.
func (t *leaderTerm) canSend(now time.Time) bool {
	return now.Before(t.sendsUntil())
}

// sendsUntil is the end of the term's proof of leadership: elements may be written before it
// (canSend). Zero while the term is not ready, or once it has ended.
func (t *leaderTerm) sendsUntil() time.Time {
	if t.ctx.Err() != nil {
		return time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ready {
		return time.Time{}
	}
	return t.verifiedUntil
}

// extendVerified records that a quorum stored an entry of this term proposed after t0: a proof of
// leadership, or a committed command.
func (t *leaderTerm) extendVerified(t0 time.Time) {
	until := t0.Add(t.n.cfg.LeaderLeaseTimeout)
	t.mu.Lock()
	if until.After(t.verifiedUntil) {
		t.verifiedUntil = until
	}
	t.mu.Unlock()
}

func (t *leaderTerm) requestVerify() {
	select {
	case t.verifyNow <- struct{}{}:
	default:
	}
}

func (t *leaderTerm) kickReconcile() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// verifyLoop is the renewal tick: every Timing.Renewal it proves leadership (proveLeadership) and
// lets every stream answer its outstanding demand. Streams that want to send between ticks (a new
// assignment, a new stream) ask for an extra proof instead of waiting for the tick; requests that
// arrive while a proof runs are answered together by the next one.
func (t *leaderTerm) verifyLoop() {
	verify := func(renew bool) {
		if t.proveLeadership() {
			t.wakeStreams(renew)
		}
	}
	verify(true)
	tick := time.NewTicker(t.n.cfg.Timing.Renewal)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
			verify(true)
		case <-t.verifyNow:
			verify(false)
		}
	}
}

// proveLeadership commits a Raft barrier proposed after t0 and, if this node still leads in the
// stretch's term, lets the term send until t0 + LeaderLeaseTimeout (canSend says why that is safe). The barrier is an entry of this term
// that the FSM never sees; it costs one log entry and one round of replication to a quorum, with
// its fsyncs, per proof. It reports false when the barrier did not commit: the term then sends
// nothing more on this proof.
func (t *leaderTerm) proveLeadership() bool {
	t0 := t.n.clock.Now()
	err := t.n.awaitFuture(t.n.raft.Barrier(t.n.cfg.ApplyTimeout))
	if err != nil {
		t.n.metrics.proofsFailed.Add(1)
		t.log.Debug().Err(err).Msg("proof of leadership failed: not sending on it")
		return false
	}
	if !t.stillLeads() {
		// The barrier committed in a later term, when this node was elected again: it proves
		// nothing about this stretch (stillLeads).
		t.n.metrics.proofsFailed.Add(1)
		t.endStale("proof of leadership committed in a later raft term")
		return false
	}
	t.n.metrics.proofSeconds.Observe(t.n.clock.Now().Sub(t0).Seconds())
	t.extendVerified(t0)
	return true
}

// wakeStreams wakes every lease stream; with renew, each answers its outstanding demand even if its
// assignment did not change.
func (t *leaderTerm) wakeStreams(renew bool) {
	t.mu.Lock()
	streams := make([]*leaseStream, 0, len(t.streams))
	for s := range t.streams {
		streams = append(streams, s)
	}
	t.mu.Unlock()
	for _, s := range streams {
		s.poke(renew)
	}
}

// wakeRing wakes the lease streams of one ring (an fsm.RingID): each sends an element if what it
// would carry changed.
func (t *leaderTerm) wakeRing(ring string) {
	t.mu.Lock()
	streams := make([]*leaseStream, 0, len(t.streams))
	for s := range t.streams {
		if s.member.Ring == ring {
			streams = append(streams, s)
		}
	}
	t.mu.Unlock()
	for _, s := range streams {
		s.poke(false)
	}
}

// addStream registers a lease stream with this term; false when the term has ended.
func (t *leaderTerm) addStream(s *leaseStream) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return false
	}
	t.streams[s] = struct{}{}
	return true
}

func (t *leaderTerm) removeStream(s *leaseStream) {
	t.mu.Lock()
	delete(t.streams, s)
	t.mu.Unlock()
}

// apply commits cmd; a commit in this stretch's Raft term proves that a quorum stored an entry of
// this term proposed after t0, as proveLeadership's barrier does. A commit in a later term (the
// node was deposed and elected again before syncLeadership noticed) proves nothing of the kind:
// cmd goes in an fsm.InTerm of this stretch's term, which the FSM refuses in any other term
// (fsm.ErrStaleTerm), and the stretch ends. While the version gate keeps InTerm out (a
// coordinator of FSM version 4 or older in the configuration), cmd goes bare as before and
// commits whatever the term; the stretch then only re-reads its term after the commit.
func (t *leaderTerm) apply(cmd fsm.Command) error {
	if t.ctx.Err() != nil {
		return t.n.leaderErr()
	}
	if err := t.n.versionGate(cmd); err != nil {
		return err
	}
	entry := cmd
	inTerm := t.n.versionGate(&fsm.InTerm{}) == nil
	if inTerm {
		c, err := fsm.NewInTerm(t.raftTerm, cmd)
		if err != nil {
			return err
		}
		entry = c
	}
	b, err := fsm.Encode(entry)
	if err != nil {
		return err
	}
	t0 := t.n.clock.Now()
	f := t.n.raft.Apply(b, t.n.cfg.ApplyTimeout)
	if err := t.n.awaitFuture(f); err != nil {
		if errors.Is(commitErr(err), lease.ErrNotLeader) {
			return t.n.leaderErr()
		}
		return commitErr(err)
	}
	resp, _ := f.Response().(error)
	if errors.Is(resp, fsm.ErrStaleTerm) || (!inTerm && !t.stillLeads()) {
		t.endStale(cmd.Type().String() + " committed in a later raft term")
		return commitErr(cmp.Or(resp, error(fsm.ErrStaleTerm)))
	}
	t.extendVerified(t0)
	t.n.metrics.countCommitted(cmd.Type())
	return commitErr(resp)
}

// stillLeads reports whether this node still leads in the stretch's Raft term. Terms only grow,
// so an entry proposed by the stretch and committed while it still leads in its term is an entry
// of its term.
func (t *leaderTerm) stillLeads() bool {
	term, leader := t.n.leadingTerm()
	return leader && term == t.raftTerm
}

// endStale ends a stretch whose Raft term passed: what it sent and decided rests on a send log
// that lacks what any intervening leader sent. syncLeadership stops it gracefully and, if this
// node leads again, starts the stretch of the current term.
func (t *leaderTerm) endStale(what string) {
	if t.ctx.Err() == nil {
		t.log.Warn().Str("what", what).Msg("this stretch's raft term has passed: ending it; nothing more is sent or committed on it")
	}
	t.cancel()
}

// reconcileLoop runs the leader's decisions whenever the state or the connections change, and when
// a pending decision becomes due, but passes start at least PassInterval apart: during a storm,
// what arrived since the last pass is decided and committed together (every commit of a pass
// kicks the loop again, so without the spacing each pass would carry little more than one event).
func (t *leaderTerm) reconcileLoop() {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.kick:
		case <-timer.C:
		}
		if wait := t.n.cfg.PassInterval - time.Since(last); !last.IsZero() && wait > 0 {
			if !wallclock.Sleep(t.ctx, wait) {
				return
			}
		}
		last = time.Now()
		wake := t.reconcile()
		next := t.n.cfg.Timing.Renewal
		if !wake.IsZero() {
			if d := wake.Sub(t.n.clock.Now()); d < next {
				next = max(d, time.Millisecond)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// reconcile is one pass of the leader's decisions: it gathers the pass's input (the committed
// rings, the connections, a copy of the send log, the releases waiting), lets leader.Step decide,
// and commits what it decided: its entries of their own one after the other, then, per ring,
// one entry (fsm.Reconcile), the rings' entries in flight together. While the version gate keeps
// Reconcile out (a coordinator of FSM version 2 or older in the configuration), it commits the
// releases, joins, downs and expiries one by one and plans every ring after them, as version 2
// did. Failed proposals are retried on the next pass: every command is idempotent and every
// decision is recomputed from the committed state. It returns when Step's next pending decision
// falls due, or a failed or refused proposal should be tried again.
func (t *leaderTerm) reconcile() (wake time.Time) {
	t.mu.Lock()
	ready, times, local := t.ready, t.times, t.settleLocal
	t.mu.Unlock()
	if !ready || t.ctx.Err() != nil {
		return time.Time{}
	}
	later := func(w time.Time) {
		if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	in, reqs := t.passInput(times, local)
	out := leader.Step(in)
	later(out.Wake)
	t.reservedSeen = out.Seen
	if out.EndSettleLocal {
		t.mu.Lock()
		t.settleLocal = false
		t.mu.Unlock()
	}
	t.commitOneByOne(out.Commit, in.Now, later)
	if !in.Gate.Reconcile {
		t.reconcileOneByOne(reqs, out, in.Now, later)
	} else {
		for _, rf := range out.Refused {
			reqs[rf.Release].done <- commitErr(rf.Err)
		}
		t.commitPasses(out.Passes, reqs, in.Now, later)
	}
	t.pruneSends()
	return wake
}

// passInput gathers what a pass decides on. The rings are read before the connections: a worker
// that leaves marks its stream first and commits Leave after, so a pass never sees the member
// gone while its stream still streams (it would join it again). The send log is copied after
// the rings were read (sendLog.snapshot says why that expires nothing early). The releases
// waiting are taken: the pass answers each of them, Input.Releases[i] being reqs[i].
func (t *leaderTerm) passInput(times leader.Times, local bool) (in leader.Input, reqs []*releaseReq) {
	in = leader.Input{Times: times, Rings: map[string]*fsm.Ring{}, Seen: t.reservedSeen, Recent: t.recent,
		Own: t.ownTiming(), TimingCommitted: t.timingCommitted, SettleLocal: local}
	t.n.fsm.View(func(s *fsm.State, _ uint64) {
		for id, r := range s.Rings {
			in.Rings[id] = r.Clone()
		}
		if s.Timing != nil {
			ts := *s.Timing
			in.State.Timing = &ts
		}
		in.State.EpochFloor, in.State.Settling = s.EpochFloor, s.Settling
	})
	in.Now = t.n.clock.Now()
	in.State.FloorAt = fsm.FloorAt(in.Now, &fsm.State{Rings: in.Rings, EpochFloor: in.State.EpochFloor})
	in.Conns = t.n.conns.states()
	in.Sends = t.sends.snapshot()
	reqs = t.takeReleases()
	for _, r := range reqs {
		in.Releases = append(in.Releases, r.rel)
	}
	// The gate reads the Raft configuration and the state: asked only about what Step may need.
	in.Gate.Reconcile = t.n.versionGate(&fsm.Reconcile{}) == nil
	in.Gate.CommitTiming = !in.TimingCommitted && t.n.versionGate(&fsm.CommitTiming{}) == nil
	in.Gate.EpochFloor = in.State.EpochFloor == 0 && t.n.versionGate(&fsm.EpochFloor{}) == nil
	return in, reqs
}

// commitOneByOne commits each command in its own entry, one after the other.
func (t *leaderTerm) commitOneByOne(cmds []fsm.Command, now time.Time, later func(time.Time)) {
	for _, c := range cmds {
		if err := t.apply(c); err != nil {
			t.log.Warn().Err(err).Stringer("command", c.Type()).Msg("proposal failed; retrying")
			later(now.Add(100 * time.Millisecond))
			continue
		}
		t.recent.Mark(c, now)
		switch c.(type) {
		case *fsm.Expire:
			t.n.metrics.expiriesSent.Add(1)
		case *fsm.CommitTiming:
			t.timingCommitted = true
		}
		t.log.Info().Stringer("command", c.Type()).Interface("args", c).Msg("committed")
	}
}

// reconcileOneByOne is the pass of FSM version 2, for while the version gate keeps Reconcile out:
// every join, down and expiry in an entry of its own, then a plan per ring on the state they
// produced. Releases that were waiting for a pass (the gate closed meanwhile) go first, each on
// its own.
func (t *leaderTerm) reconcileOneByOne(reqs []*releaseReq, out leader.Output, now time.Time, later func(time.Time)) {
	for _, r := range reqs {
		r.done <- t.apply(&r.rel)
	}
	t.commitOneByOne(out.Unbatched, now, later)
	if out.HoldPlan {
		return
	}
	for _, r := range t.snapshotRings() {
		plan := fsm.Plan(r)
		if plan == nil {
			continue
		}
		err := t.apply(plan)
		switch {
		case errors.Is(err, fsm.ErrUnsafeAssignment):
			t.log.Debug().Err(err).Msg("plan refused; planning again")
			later(now.Add(50 * time.Millisecond))
		case err != nil:
			t.log.Warn().Err(err).Msg("plan proposal failed; retrying")
			later(now.Add(100 * time.Millisecond))
		default:
			t.n.metrics.countMoved(r.Key, leader.MovedTokens(r, plan.Assignments))
			t.log.Info().Str("ring", r.Key.String()).Interface("assignments", plan.Assignments).Msg("committed assignment")
		}
	}
}

func (t *leaderTerm) snapshotRings() map[string]*fsm.Ring {
	out := map[string]*fsm.Ring{}
	t.n.fsm.View(func(s *fsm.State, _ uint64) {
		for id, r := range s.Rings {
			out[id] = r.Clone()
		}
	})
	return out
}

// pruneSends drops send times the state no longer needs.
func (t *leaderTerm) pruneSends() {
	lowest := map[memberID]uint64{}
	t.n.fsm.View(func(s *fsm.State, _ uint64) {
		for id, r := range s.Rings {
			for _, m := range r.Members {
				low := m.Epoch
				for _, h := range m.Holds {
					low = min(low, h.Epoch)
				}
				lowest[memberID{Ring: id, WorkerID: m.WorkerID, Incarnation: m.Incarnation}] = low
			}
		}
	})
	t.sends.prune(func(m memberID) (uint64, bool) {
		low, ok := lowest[m]
		return low, ok
	})
}
