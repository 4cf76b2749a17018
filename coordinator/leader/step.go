package leader

import (
	"maps"
	"slices"
	"time"

	"github.com/retryring/retryring/fsm"
)

// Input is everything one reconcile pass looks at, as plain values.
type Input struct {
	// Now is the leader's clock, read once for the pass.
	Now   time.Time
	Times Times
	// Rings are copies of the committed rings, by fsm.RingID, read before Conns: a worker that
	// leaves marks its stream first and commits Leave after, so a pass never sees the member gone
	// while its stream still streams (it would join it again). Step modifies them.
	Rings map[string]*fsm.Ring
	// Conns are the members' connections to this leader.
	Conns map[Member]Conn
	// Sends is a copy of the term's send log taken after Rings was read (sendLog.snapshot in the
	// coordinator says why that order expires nothing early).
	Sends Sends
	// Releases are the workers' releases waiting for this pass (batched only).
	Releases []fsm.Release
	// Seen and Recent are the term's own memory of earlier passes: Step reads them, the driver
	// keeps Output.Seen and marks in Recent what it committed.
	Seen   Seen
	Recent Recent

	// State are the parts of the committed state, besides the rings, that the pass decides on.
	State StateFacts
	// Own is the lease timing this leader runs with; TimingCommitted, whether it is in the state.
	Own             fsm.LeaseTiming
	TimingCommitted bool
	// SettleLocal: this term settles a new or recovered state on its own (the version gate kept
	// its floor out at the start, coordinator/settle.go).
	SettleLocal bool
	// Gate says which commands the version gate lets in.
	Gate Gate
}

// StateFacts are what a pass reads of the committed state besides the rings.
type StateFacts struct {
	Timing     *fsm.TimingState
	EpochFloor uint64
	Settling   bool
	// FloorAt is fsm.FloorAt of the pass's now on the state.
	FloorAt uint64
}

// Gate says which commands every coordinator of the configuration knows (the version gate).
type Gate struct {
	// Reconcile: one entry per ring and pass (FSM version 3); else every decision goes in an
	// entry of its own and the rings are planned after them, as version 2 did.
	Reconcile    bool
	CommitTiming bool
	EpochFloor   bool
}

// Output is what one reconcile pass decided.
type Output struct {
	// Commit are entries of their own, committed one after the other before the passes: the end
	// of the settling, the lease timing, the epoch floor, the hand-ons and even-out steps. The
	// passes are planned on the rings read before them; their commits wake the next pass.
	Commit []fsm.Command
	// Passes (Gate.Reconcile) are one entry per ring, proposed together.
	Passes []Pass
	// Refused are releases the state refuses on its own: answered at once.
	Refused []Refusal
	// Unbatched (no Gate.Reconcile) are the joins, downs and expiries, each committed in an entry
	// of its own after the waiting releases; the driver then plans every ring on the state they
	// produced, unless HoldPlan.
	Unbatched []fsm.Command
	// HoldPlan: the state is settling; no assignment on this pass.
	HoldPlan bool
	// EndSettleLocal: the term's own settling is over.
	EndSettleLocal bool
	// Seen replaces Input.Seen.
	Seen Seen
	// Wake is when the next pending decision falls due (zero: none is pending).
	Wake time.Time
}

// Step is one reconcile pass: the decisions that are due (settling, timing, floor, hand-ons and
// even-out steps, then per ring the joins, downs and expiries), and per ring one entry of the
// releases and those decisions followed by the plan of the ring they leave (BuildPass). Commands
// proposed within ReproposeAfter are left out until then. Failed proposals are the driver's: it
// retries on the next pass, as every command is idempotent and every decision is recomputed from
// the committed state.
func Step(in Input) Output {
	p := &pass{in: in}
	p.settling()
	p.timing()
	p.floor()
	for m, cs := range in.Conns {
		// A streaming member of a ring nobody has joined yet: the ring exists from the Join on.
		if _, ok := in.Rings[m.Ring]; !ok && cs.Streaming {
			in.Rings[m.Ring] = &fsm.Ring{Key: cs.Ring, Members: map[string]*fsm.Member{}, LastEpoch: in.State.EpochFloor}
		}
	}
	ids := slices.Sorted(maps.Keys(in.Rings))
	decisions := make(map[string]RingDecisions, len(ids))
	for _, id := range ids {
		d := DecideRing(in.Now, in.Times, id, in.Rings[id], in.Conns, in.Sends)
		d.HoldPlan = p.out.HoldPlan
		p.later(d.Wake)
		decisions[id] = d
	}
	// The hand-ons and steps go in entries of their own before the passes: the passes plan on the
	// rings read before them, and the entry's commit wakes the next pass, which plans on the new
	// target.
	moves, w, seen := movements(in.Now, in.Rings, in.Seen)
	p.later(w)
	p.out.Seen = seen
	for _, c := range moves {
		p.commit(c)
	}
	if in.Gate.Reconcile {
		p.passes(ids, decisions)
	} else {
		for _, id := range ids {
			for _, c := range decisions[id].Commands() {
				if p.fresh(c) {
					p.out.Unbatched = append(p.out.Unbatched, c)
				}
			}
		}
	}
	return p.out
}

// pass is one Step under way.
type pass struct {
	in  Input
	out Output
	// local: the term still settles on its own (SettleLocal, until settling ends it).
	local bool
}

func (p *pass) later(w time.Time) {
	if !w.IsZero() && (p.out.Wake.IsZero() || w.Before(p.out.Wake)) {
		p.out.Wake = w
	}
}

// fresh reports whether c may be proposed now (the reproposal dedup), else wakes when it may.
func (p *pass) fresh(c fsm.Command) bool {
	if wait := p.in.Recent.Wait(c, p.in.Now); wait > 0 {
		p.later(p.in.Now.Add(wait))
		return false
	}
	return true
}

// commit adds c to the entries of their own.
func (p *pass) commit(c fsm.Command) {
	if p.fresh(c) {
		p.out.Commit = append(p.out.Commit, c)
	}
}

// settling: a bootstrapped or recovered state assigns nothing before every earlier lease may
// have ended (coordinator/settle.go); the pass that gets there ends the settling first.
func (p *pass) settling() {
	p.local = p.in.SettleLocal
	if !p.in.State.Settling && !p.local {
		return
	}
	if until := p.in.Times.HoldsAliveUntil(); !p.in.Now.After(until) {
		p.out.HoldPlan = true
		p.later(until.Add(time.Nanosecond))
		return
	}
	p.out.EndSettleLocal, p.local = p.local, false
	if p.in.State.Settling {
		p.commit(&fsm.EpochFloor{Floor: p.in.State.EpochFloor, Settled: true, AtMs: p.in.Now.UnixMilli()})
	}
}

// timing: this leader's own timing while the version gate kept it out at the start (once every
// server knows version 2), else a retirement of the longest committed timing once it is due
// (DecideRetire).
func (p *pass) timing() {
	if !p.in.TimingCommitted {
		if p.in.Gate.CommitTiming {
			p.commit(&fsm.CommitTiming{Timing: p.in.Own})
		}
		return
	}
	retire, w := DecideRetire(p.in.Now, p.in.Times, p.in.State.Timing, p.in.Own)
	if retire != nil {
		p.commit(retire)
		return
	}
	p.later(w)
}

// floor: once a rolling upgrade from FSM version 3 has finished, the state gets its first floor
// (no settling: it lost nothing). A term still settling on its own carries the settling into the
// replicated state with the floor, so that a next leader settles too rather than assign at once.
func (p *pass) floor() {
	if p.in.State.EpochFloor != 0 || !p.in.Gate.EpochFloor {
		return
	}
	c := &fsm.EpochFloor{Floor: p.in.State.FloorAt, Settle: p.local, Reason: "upgrade", AtMs: p.in.Now.UnixMilli()}
	if p.local {
		c.Reason = "bootstrap"
	}
	p.commit(c)
}

// passes builds one entry per ring (BuildPass), its releases given by index into Input.Releases.
func (p *pass) passes(ids []string, decisions map[string]RingDecisions) {
	byRing := map[string][]int{}
	for i, rel := range p.in.Releases {
		id := fsm.RingID(rel.Ring)
		byRing[id] = append(byRing[id], i)
	}
	for _, id := range ids {
		ps := p.build(p.in.Rings[id], byRing[id], decisions[id], p.fresh)
		delete(byRing, id)
		if !ps.Entry.Empty() {
			p.out.Passes = append(p.out.Passes, ps)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byRing)) {
		// A ring this leader does not know: the state answers as it would on its own.
		idx := byRing[id]
		p.build(&fsm.Ring{Key: p.in.Releases[idx[0]].Ring, Members: map[string]*fsm.Member{}}, idx, RingDecisions{}, nil)
	}
}

func (p *pass) build(r *fsm.Ring, idx []int, d RingDecisions, fresh func(fsm.Command) bool) Pass {
	rels := make([]fsm.Release, len(idx))
	for i, j := range idx {
		rels[i] = p.in.Releases[j]
	}
	ps, refused := BuildPass(r, rels, d, fresh)
	for i, j := range ps.Releases {
		ps.Releases[i] = idx[j]
	}
	for _, rf := range refused {
		p.out.Refused = append(p.out.Refused, Refusal{Release: idx[rf.Release], Err: rf.Err})
	}
	return ps
}
