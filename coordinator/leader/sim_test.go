package leader

import (
	"cmp"
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// A simulation of the leader's decisions on a manual clock: the committed state, the send log,
// Step (DecideRing, BuildPass, fsm.Plan), exactly as the leader runs them, driven by generated histories of
// joins, crashes, reconnects, new incarnations, releases, leaves, time passing and leader changes.
// The leader's pass is Step; its sends are recorded in Sends as the coordinator's sendLog.stamp
// records them.
// Every element a worker receives is usable by it from the demand it answers until that demand
// plus TTL×(1+ρ) (its clock may run slow), or until it receives the next one or leaves. No two
// workers may be able to use one token, or Node-0, at the same instant.

type simProc struct {
	id, inc    string
	connected  bool
	demanding  bool // one element of demand is outstanding, sent at demandAt
	demandAt   time.Time
	lastEpoch  uint64 // of this connection's stream
	got        []lease.Lease
	recvAt     []time.Time
	leftAt     time.Time
	releasable uint64 // an epoch whose lease dropped something: the worker may release it
}

type sim struct {
	// timing is the current leader's; leader is its node id, as its CommitTiming names it.
	timing lease.Timing
	leader string
	now    time.Time
	state  *fsm.State
	tt     Times
	sends  Sends
	seen   Seen
	procs  []*simProc
	log    []string
	// releases are the workers' releases waiting for the leader's next pass.
	releases []fsm.Release
	// rolling, when set, is a rolling restart: the nodes one of which leads after each leader
	// change; at each change one more of them may first restart onto rolling.to.
	rolling *rollingRestart
	// maxAdvance bounds one step of time passing. Default 700ms.
	maxAdvance time.Duration
}

// rollingRestart is a cluster whose nodes are restarted one by one onto a new timing.
type rollingRestart struct {
	to        lease.Timing
	nodes     []string
	timings   map[string]lease.Timing
	restarted int
}

func newSim() *sim {
	s := &sim{timing: testTiming.WithDefaults(), leader: "c1", now: t0, state: fsm.NewState()}
	s.newTerm(t0)
	return s
}

// newTerm makes a new leader, running s.timing, take over at ElectedAt: it commits its timing
// before it sends anything, then bounds what earlier leaders sent by the longest committed one,
// as leaderTerm.settleTiming does.
func (s *sim) newTerm(electedAt time.Time) {
	own := s.ownTiming()
	if err := s.state.Apply(&fsm.CommitTiming{Timing: own}); err != nil {
		panic(err)
	}
	s.tt = Times{
		ElectedAt: electedAt, LeaderLease: defaultLeaderLease,
		HolderBound: own.HolderBound(), InheritedBound: max(own.HolderBound(), s.state.Timing.Longest.HolderBound()),
		GraceEnd: electedAt.Add(defaultSilenceTimeout).Add(defaultReconnectGrace),
	}
	s.sends = Sends{}
	s.seen = nil
}

func (s *sim) ownTiming() fsm.LeaseTiming { return fsm.NewLeaseTiming(s.leader, s.timing) }

func (p *simProc) member() Member {
	return Member{Ring: fsm.RingID(testRing), WorkerID: p.id, Incarnation: p.inc}
}

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%v ", s.now.Sub(t0))+fmt.Sprintf(format, args...))
}

// start starts a process of worker id: a new incarnation, numbered from 1 for each id, that connects
// and demands its first element. A connected older process of the id is cut off; it may still use
// its lease.
func (s *sim) start(id string) *simProc {
	n := 1
	for _, p := range s.procs {
		if p.id == id {
			n++
			p.connected = false
		}
	}
	p := &simProc{id: id, inc: strconv.Itoa(n), connected: true, demanding: true, demandAt: s.now}
	s.procs = append(s.procs, p)
	s.logf("start %s/%s", id, p.inc)
	return p
}

// reconcile runs the leader's pass until nothing changes, pushing new assignments at once.
func (s *sim) reconcile() {
	for range 10 {
		if committed, _ := s.decideAndApply(s.state); len(committed) == 0 {
			return
		}
		s.deliver(false)
	}
}

// decideAndApply runs one leader pass on st, as leaderTerm.reconcile drives Step: it returns what
// it committed, and when a decision that is not due yet becomes due (zero: none is pending). The
// sim's state never gets an epoch floor (the gate keeps it out, as on a cluster upgraded from
// FSM version 3 that has not finished), so its epochs count from 1.
func (s *sim) decideAndApply(st *fsm.State) (committed []fsm.Command, wake time.Time) {
	conns := map[Member]Conn{}
	for _, p := range s.procs {
		if p.connected {
			conns[p.member()] = Conn{Ring: testRing, Live: true, Streaming: true}
		}
	}
	rings := map[string]*fsm.Ring{}
	for id, r := range st.Rings {
		rings[id] = r.Clone()
	}
	releases := s.releases
	s.releases = nil
	out := Step(Input{
		Now: s.now, Times: s.tt, Rings: rings, Conns: conns, Sends: s.sends, Releases: releases, Seen: s.seen,
		State: StateFacts{Timing: st.Timing, EpochFloor: st.EpochFloor, Settling: st.Settling, FloorAt: fsm.FloorAt(s.now, st)},
		Own:   s.ownTiming(), TimingCommitted: true,
		Gate: Gate{Reconcile: true, CommitTiming: true},
	})
	s.seen = out.Seen
	commit := func(c fsm.Command) bool {
		if err := st.Apply(c); err != nil {
			return false
		}
		committed = append(committed, c)
		s.logf("commit %s %+v", c.Type(), c)
		return true
	}
	for _, c := range out.Commit {
		commit(c)
	}
	// The ring's releases, joins, downs, expiries and plan, in one entry (BuildPass); a refused
	// entry's releases wait for the next pass.
	for _, p := range out.Passes {
		if !commit(p.Command()) {
			for _, i := range p.Releases {
				s.releases = append(s.releases, releases[i])
			}
		}
	}
	return committed, out.Wake
}

// queueRelease hands a worker's release to the leader's next pass, as submitRelease does.
func (s *sim) queueRelease(rel fsm.Release) {
	s.releases = append(s.releases, rel)
}

// deliver answers outstanding demand. A worker asks for the next element at some later event
// (its REQUEST_N may be slow), so elements answer demands of various ages.
func (s *sim) deliver(renew bool) { s.deliverFrom(s.state, renew) }

// deliverFrom answers demand from st: a deposed leader answers from the state it knows, which may
// lack entries that the new leader commits.
func (s *sim) deliverFrom(st *fsm.State, renew bool) {
	for _, p := range s.procs {
		if !p.connected || !p.demanding {
			continue
		}
		// The send decision the coordinator's streams make (Element), with the record of the
		// send. The sim's leader always holds a proof of leadership where it sends.
		stream := Stream{Member: p.member(), Ring: testRing, TTL: s.timing.TTL, Renewal: s.timing.Renewal}
		d, ok := Element(st.Ring(testRing), stream, Share{}, Sent{Renew: renew, Epoch: p.lastEpoch}, s.now, s.now.Add(time.Nanosecond))
		if !ok {
			continue
		}
		if err := d.Check(s.now); err != nil {
			panic(err)
		}
		s.sends.Record(p.member(), d.Element.Epoch, s.now)
		l, err := d.Element.Decode(p.demandAt)
		if err != nil {
			panic(err)
		}
		if n := len(p.got); n > 0 && l.Epoch < p.got[n-1].Epoch {
			continue // the guard never goes back to an older epoch
		}
		if n := len(p.got); n > 0 && l.Epoch > p.got[n-1].Epoch {
			prev := p.got[n-1]
			if !prev.Ranges.Subtract(l.Ranges).Empty() || (prev.IsNode0() && !l.IsNode0()) {
				p.releasable = l.Epoch
			}
		}
		p.got = append(p.got, l)
		p.recvAt = append(p.recvAt, s.now)
		p.lastEpoch, p.demanding = l.Epoch, false
	}
}

func (s *sim) step(t *rapid.T) {
	var live, gone []*simProc
	for _, p := range s.procs {
		switch {
		case p.connected:
			live = append(live, p)
		case p.leftAt.IsZero():
			gone = append(gone, p)
		}
	}
	switch rapid.IntRange(0, 11).Draw(t, "event") {
	case 0, 1, 2: // time passes, then a renewal tick
		maxMs := int(cmp.Or(s.maxAdvance, 700*time.Millisecond) / time.Millisecond)
		s.now = s.now.Add(time.Duration(rapid.IntRange(0, maxMs).Draw(t, "ms")) * time.Millisecond)
		s.reconcile()
		s.deliver(true)
	case 3: // a worker process starts (maybe a new incarnation of a known id)
		s.start(fmt.Sprintf("w%d", rapid.IntRange(0, 3).Draw(t, "id")))
	case 4: // a worker crashes or is cut off
		if len(live) > 0 {
			p := rapid.SampledFrom(live).Draw(t, "crash")
			p.connected = false
			s.logf("crash %s/%s", p.id, p.inc)
		}
	case 5: // a cut-off worker reconnects with the same incarnation
		if len(gone) > 0 {
			p := rapid.SampledFrom(gone).Draw(t, "reconnect")
			superseded := false
			for _, q := range s.procs {
				superseded = superseded || (q.id == p.id && q != p && q.connected)
			}
			if !superseded {
				p.connected, p.demanding, p.demandAt, p.lastEpoch = true, true, s.now, 0
				s.logf("reconnect %s/%s", p.id, p.inc)
			}
		}
	case 6: // a worker releases what its last shrink dropped
		if len(live) > 0 {
			p := rapid.SampledFrom(live).Draw(t, "release")
			if p.releasable > 0 {
				s.queueRelease(fsm.Release{Ring: testRing, WorkerID: p.id, Incarnation: p.inc, Epoch: p.releasable})
				s.logf("release %s/%s epoch %d: waits for the next pass", p.id, p.inc, p.releasable)
				p.releasable = 0
			}
		}
	case 7: // a worker leaves: it stops using everything, then the leave is committed
		if len(live) > 0 {
			p := rapid.SampledFrom(live).Draw(t, "leave")
			p.connected, p.leftAt = false, s.now
			_ = s.state.Apply(&fsm.Leave{Ring: testRing, WorkerID: p.id, Incarnation: p.inc})
			s.logf("leave %s/%s", p.id, p.inc)
		}
	case 8: // leader change: the old leader may still renew until its last quorum contact + LLT,
		// which is after the new leader's election at worst by LLT.
		// Two renewals after the election, the second answering the demand the first prompted.
		elected := s.now
		llt := int(defaultLeaderLease/time.Millisecond) - 1
		x1 := rapid.IntRange(0, llt).Draw(t, "old_send_1_ms")
		x2 := rapid.IntRange(x1, llt).Draw(t, "old_send_2_ms")
		// The old leader's last proposals may reach the new leader's log without the old leader
		// ever seeing them committed: the new leader commits them, the old one keeps renewing
		// from the state before them.
		next := s.state
		if rapid.Bool().Draw(t, "old_leader_behind") {
			next = s.state.Clone()
			s.decideAndApply(next)
		}
		s.now = elected.Add(time.Duration(x1) * time.Millisecond)
		s.deliver(true)
		for _, p := range s.procs {
			if p.connected && !p.demanding { // asks again at once, after the election
				p.demanding, p.demandAt = true, s.now
			}
		}
		s.now = elected.Add(time.Duration(x2) * time.Millisecond)
		s.deliver(true)
		s.state = next
		if r := s.rolling; r != nil {
			if r.restarted < len(r.nodes) && rapid.Bool().Draw(t, "restart_one") {
				r.timings[r.nodes[r.restarted]] = r.to
				r.restarted++
			}
			s.leader = rapid.SampledFrom(r.nodes).Draw(t, "new_leader")
			s.timing = r.timings[s.leader]
		}
		s.newTerm(elected)
		for _, p := range s.procs {
			// Workers find the new leader later (a reconnect event), still using what they hold.
			if p.connected && rapid.Bool().Draw(t, "reconnects_later") {
				p.connected = false
			}
			p.lastEpoch = 0
		}
		s.logf("leader change, %s elected at %v with TTL %v", s.leader, elected.Sub(t0), s.timing.TTL)
		s.reconcile()
		s.deliver(true)
	case 9:
		s.reconcile()
	case 10, 11: // a worker asks for its next element
		if len(live) > 0 {
			p := rapid.SampledFrom(live).Draw(t, "demand")
			if !p.demanding {
				p.demanding, p.demandAt = true, s.now
			}
		}
	}
}

// usableUntil is the last instant at which a worker may use l: its demand plus its TTL, on a
// clock that runs slow by the drift bound.
func (s *sim) usableUntil(l lease.Lease) time.Time {
	return l.ValidFrom.Add(l.TTL + time.Duration(float64(l.TTL)*s.timing.Drift))
}

// exclusive checks exclusivity and one Node-0 over every stretch of use of every worker.
func (s *sim) exclusive() error {
	type use struct {
		who      string
		from, to time.Time
		l        lease.Lease
	}
	var uses []use
	for _, p := range s.procs {
		for i, l := range p.got {
			end := s.usableUntil(l)
			if i+1 < len(p.got) && p.recvAt[i+1].Before(end) {
				end = p.recvAt[i+1]
			}
			if !p.leftAt.IsZero() && p.leftAt.Before(end) {
				end = p.leftAt
			}
			uses = append(uses, use{who: p.id + "/" + p.inc, from: p.recvAt[i], to: end, l: l})
		}
	}
	for i, a := range uses {
		for _, b := range uses[i+1:] {
			if a.who == b.who || !a.from.Before(b.to) || !b.from.Before(a.to) {
				continue
			}
			if a.l.Ranges.Overlaps(b.l.Ranges) || (a.l.IsNode0() && b.l.IsNode0()) {
				return fmt.Errorf("%s epoch %d %v node %d [%v,%v] and %s epoch %d %v node %d [%v,%v] overlap",
					a.who, a.l.Epoch, a.l.Ranges, a.l.NodeIndex, a.from.Sub(t0), a.to.Sub(t0),
					b.who, b.l.Epoch, b.l.Ranges, b.l.NodeIndex, b.from.Sub(t0), b.to.Sub(t0))
			}
		}
	}
	return nil
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func TestSimulatedLeaderKeepsLeasesExclusive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runSim(t, newSim()) })
}

// A rolling restart of the coordinators from TTL 10 s to TTL 3 s, in any order, with leaders of
// either timing elected in between (a node not restarted yet may lead again): no leader hands a
// token on while a lease sent under the 10 s timing may still be in use, because every leader
// bounds the leases of earlier ones by the longest committed timing, not by its own.
func TestSimulatedRollingRestartOntoAShorterTTL(t *testing.T) {
	long := lease.Timing{TTL: 10 * time.Second, Renewal: 2 * time.Second}.WithDefaults()
	short := lease.Timing{TTL: 3 * time.Second, Renewal: time.Second}.WithDefaults()
	rapid.Check(t, func(t *rapid.T) {
		s := &sim{timing: long, leader: "c1", now: t0, state: fsm.NewState(), maxAdvance: 12 * time.Second,
			rolling: &rollingRestart{to: short, nodes: []string{"c1", "c2", "c3"},
				timings: map[string]lease.Timing{"c1": long, "c2": long, "c3": long}}}
		s.newTerm(t0)
		runSim(t, s)
	})
}

// runSim runs a generated history on s, then lets the ring settle: no token or Node-0 may have
// been usable by two workers at once, and the ring settles within invariant 1's bound.
func runSim(t *rapid.T, s *sim) {
	steps := rapid.IntRange(10, 80).Draw(t, "steps")
	for range steps {
		s.step(t)
	}
	// Invariant 1's time bound: with no membership change after now, the ring settles within
	// the holder bound plus two renewals (one more for this loop's granularity) of the later
	// of now and the moments a new term may first expire or down anything; what an earlier
	// leader sent under a longer timing ends by holdsAliveUntil.
	from := s.now
	for _, t := range []time.Time{s.tt.ElectedAt.Add(s.tt.LeaderLease), s.tt.DownAfter()} {
		if t.After(from) {
			from = t
		}
	}
	bound := from.Add(s.tt.HolderBound)
	if s.tt.HoldsAliveUntil().After(bound) {
		bound = s.tt.HoldsAliveUntil()
	}
	bound = bound.Add(3 * s.timing.Renewal)
	var settledAt time.Time
	// Let the ring settle: workers release, time passes, every hold ends.
	for range 20 {
		for _, p := range s.procs {
			if p.connected && p.releasable > 0 {
				s.queueRelease(fsm.Release{Ring: testRing, WorkerID: p.id, Incarnation: p.inc, Epoch: p.releasable})
				p.releasable = 0
			}
		}
		s.now = s.now.Add(s.timing.Renewal)
		for _, p := range s.procs {
			if p.connected && !p.demanding {
				p.demanding, p.demandAt = true, s.now
			}
		}
		s.reconcile()
		s.deliver(true)
		if r := s.state.Ring(testRing); settledAt.IsZero() && (r == nil || r.Settled()) {
			settledAt = s.now
		}
	}
	if err := s.exclusive(); err != nil {
		t.Fatalf("%v\n%s", err, joinLines(s.log))
	}
	if r := s.state.Ring(testRing); r != nil && !r.Settled() {
		t.Fatalf("ring not settled after the quiet period: %+v\n%s", r, joinLines(s.log))
	}
	if settledAt.After(bound) {
		t.Fatalf("invariant 1: settled %v after the last change, later than its bound %v\n%s",
			settledAt.Sub(from), bound.Sub(from), joinLines(s.log))
	}
}
