package leader

import (
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Pass is what one reconcile pass commits for one ring: one entry, and the releases it answers
// once that entry is committed.
type Pass struct {
	Entry *fsm.Reconcile
	// Parts are the leader's decisions in the entry, marked proposed once it is committed (Recent).
	Parts []fsm.Command
	// Releases are the releases in the entry, as indexes into the releases the pass was built
	// from (Input.Releases for Step).
	Releases []int
	// Moved is the plan's MovedTokens, counted once the entry is committed.
	Moved float64
}

// Command is the entry to propose: a plain Assign when the pass carries nothing but a plan (a
// type every version knows), else the Reconcile.
func (p Pass) Command() fsm.Command {
	e := p.Entry
	if len(e.Releases)+len(e.Joins)+len(e.Downs)+len(e.Expires) == 0 {
		return &fsm.Assign{Ring: e.Ring, Assignments: e.Assignments}
	}
	return e
}

// Refusal is a release the state refuses on its own (a member unknown, an epoch not assigned):
// the worker is answered at once with Err, the state's error.
type Refusal struct {
	Release int // index into the releases the pass was built from
	Err     error
}

// BuildPass previews r (a copy of the committed ring, modified here) as the releases and the
// leader's decisions leave it, in the order fsm.Reconcile applies them, and plans it there. A
// release the state refuses is left out and returned as a Refusal, as it would have been refused
// on its own. Of two joins of one worker id only the last is kept: the last join wins anyway,
// and the entry must be idempotent. A decision for which fresh is false (proposed moments ago:
// the reproposal dedup) is left out; nil fresh keeps every one.
func BuildPass(r *fsm.Ring, releases []fsm.Release, d RingDecisions, fresh func(fsm.Command) bool) (Pass, []Refusal) {
	st := &fsm.State{Rings: map[string]*fsm.Ring{fsm.RingID(r.Key): r}}
	p := Pass{Entry: &fsm.Reconcile{Ring: r.Key}}
	var refused []Refusal
	use := func(c fsm.Command) bool { return (fresh == nil || fresh(c)) && st.Apply(c) == nil }
	for i := range releases {
		rel := &releases[i]
		if err := st.Apply(rel); err != nil {
			refused = append(refused, Refusal{Release: i, Err: err})
			continue
		}
		p.Releases = append(p.Releases, i)
		p.Entry.Releases = append(p.Entry.Releases, fsm.ReleaseRef{WorkerID: rel.WorkerID, Incarnation: rel.Incarnation, Epoch: rel.Epoch})
	}
	lastJoin := map[string]int{}
	for i, j := range d.Joins {
		lastJoin[j.WorkerID] = i
	}
	for i := range d.Joins {
		j := &d.Joins[i]
		if lastJoin[j.WorkerID] != i || !use(j) {
			continue
		}
		p.Parts = append(p.Parts, j)
		p.Entry.Joins = append(p.Entry.Joins, fsm.MemberRef{WorkerID: j.WorkerID, Incarnation: j.Incarnation})
	}
	for i := range d.Downs {
		dn := &d.Downs[i]
		if !use(dn) {
			continue
		}
		p.Parts = append(p.Parts, dn)
		p.Entry.Downs = append(p.Entry.Downs, fsm.MemberRef{WorkerID: dn.WorkerID, Incarnation: dn.Incarnation})
	}
	for i := range d.Expires {
		e := &d.Expires[i]
		if !use(e) {
			continue
		}
		p.Parts = append(p.Parts, e)
		p.Entry.Expires = append(p.Entry.Expires, fsm.ExpireRef{WorkerID: e.WorkerID, Incarnation: e.Incarnation, UpTo: e.UpTo, Generation: e.Generation})
	}
	if plan := fsm.Plan(st.Ring(r.Key)); plan != nil && !d.HoldPlan {
		p.Entry.Assignments = plan.Assignments
		p.Moved = MovedTokens(st.Ring(r.Key), plan.Assignments)
	}
	return p, refused
}

// MovedTokens is the number of tokens a plan gives members that did not hold them before: a token
// that changes owner counts once, when its new owner gets it (a shrinking member's loss is not
// counted again). r is the ring the plan was made on.
func MovedTokens(r *fsm.Ring, as []fsm.Assignment) float64 {
	total := 0.0
	for _, a := range as {
		gained := lease.Normalize(a.Ranges)
		if m := r.Members[fsm.MemberKey(a.WorkerID, a.Incarnation)]; m != nil {
			gained = gained.Subtract(m.Held())
		}
		for _, rg := range gained {
			total += float64(rg.Width()) + 1
		}
	}
	return total
}
