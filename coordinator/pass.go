package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// passesInFlight bounds the entries one reconcile pass has proposed and not yet seen committed.
// raft.Apply is pipelined (the leader writes the entries queued meanwhile in one batch, one fsync),
// so a pass over a hundred rings costs about one commit round, not a hundred; the bound keeps a
// pass over thousands of rings from queueing them all at once behind the other proposals.
const passesInFlight = 32

// releaseReq is a worker's release waiting for the next pass of its ring.
type releaseReq struct {
	rel  fsm.Release
	done chan error // buffered: the pass never waits for the handler
}

// ringPass is what one reconcile pass commits for one ring: one entry, and the releases it
// answers once that entry is committed.
type ringPass struct {
	entry    *fsm.Reconcile
	parts    []fsm.Command // the leader's decisions in the entry, for the reproposal dedup
	releases []*releaseReq
	// moved is the plan's movedTokens, counted once the entry is committed.
	moved float64
}

// command is the entry to propose: a plain Assign when the pass carries nothing but a plan (a
// type every version knows), else the Reconcile.
func (p ringPass) command() fsm.Command {
	e := p.entry
	if len(e.Releases)+len(e.Joins)+len(e.Downs)+len(e.Expires) == 0 {
		return &fsm.Assign{Ring: e.Ring, Assignments: e.Assignments}
	}
	return e
}

// buildPass previews r (a copy of the committed ring, modified here) as the releases and the
// leader's decisions leave it, in the order fsm.Reconcile applies them, and plans it there. A
// release the state refuses (a member unknown, an epoch not assigned) is answered at once with
// the state's error and left out, as it would have been refused on its own. Of two joins of one
// worker id only the last is kept: the last join wins anyway, and the entry must be idempotent.
// A decision for which fresh is false (proposed moments ago: the reproposal dedup) is left out;
// nil fresh keeps every one.
func buildPass(r *fsm.Ring, releases []*releaseReq, d ringDecisions, fresh func(fsm.Command) bool) ringPass {
	st := &fsm.State{Rings: map[string]*fsm.Ring{fsm.RingID(r.Key): r}}
	p := ringPass{entry: &fsm.Reconcile{Ring: r.Key}}
	use := func(c fsm.Command) bool { return (fresh == nil || fresh(c)) && st.Apply(c) == nil }
	joins, downs, expires := d.joins, d.downs, d.expires
	for _, req := range releases {
		if err := st.Apply(&req.rel); err != nil {
			req.done <- commitErr(err)
			continue
		}
		p.releases = append(p.releases, req)
		p.entry.Releases = append(p.entry.Releases, fsm.ReleaseRef{WorkerID: req.rel.WorkerID, Incarnation: req.rel.Incarnation, Epoch: req.rel.Epoch})
	}
	lastJoin := map[string]int{}
	for i, j := range joins {
		lastJoin[j.WorkerID] = i
	}
	for i := range joins {
		if lastJoin[joins[i].WorkerID] != i || !use(&joins[i]) {
			continue
		}
		p.parts = append(p.parts, &joins[i])
		p.entry.Joins = append(p.entry.Joins, fsm.MemberRef{WorkerID: joins[i].WorkerID, Incarnation: joins[i].Incarnation})
	}
	for i := range downs {
		if !use(&downs[i]) {
			continue
		}
		p.parts = append(p.parts, &downs[i])
		p.entry.Downs = append(p.entry.Downs, fsm.MemberRef{WorkerID: downs[i].WorkerID, Incarnation: downs[i].Incarnation})
	}
	for i := range expires {
		e := &expires[i]
		if !use(e) {
			continue
		}
		p.parts = append(p.parts, e)
		p.entry.Expires = append(p.entry.Expires, fsm.ExpireRef{WorkerID: e.WorkerID, Incarnation: e.Incarnation, UpTo: e.UpTo, Generation: e.Generation})
	}
	if plan := fsm.Plan(st.Ring(r.Key)); plan != nil && !d.holdPlan {
		p.entry.Assignments = plan.Assignments
		p.moved = movedTokens(st.Ring(r.Key), plan.Assignments)
	}
	return p
}

// submitRelease commits rel with the next reconcile pass of its ring, in the entry that also
// carries the plan it allows: the releases of a join storm cost no entry of their own, and the
// tokens they free are handed on in the same commit (the release is committed no later than the
// assignment that uses it). The worker's answer waits for that entry: at most one pass longer
// than a commit of its own. Before the term is ready (no pass runs yet), and while the version
// gate keeps Reconcile out, the release is committed on its own.
func (t *leaderTerm) submitRelease(rel fsm.Release) error {
	if t.ctx.Err() != nil {
		return t.n.leaderErr()
	}
	if !t.isReady() || t.n.versionGate(&fsm.Reconcile{}) != nil {
		return t.apply(&rel)
	}
	req := &releaseReq{rel: rel, done: make(chan error, 1)}
	t.mu.Lock()
	t.releases = append(t.releases, req)
	t.mu.Unlock()
	t.kickReconcile()
	timer := time.NewTimer(t.n.cfg.ApplyTimeout + t.n.cfg.PassInterval)
	defer timer.Stop()
	select {
	case err := <-req.done:
		return err
	case <-t.ctx.Done():
		return t.n.leaderErr()
	case <-timer.C:
		return fmt.Errorf("%w: release not committed within %v", lease.ErrUnavailable, t.n.cfg.ApplyTimeout+t.n.cfg.PassInterval)
	}
}

// takeReleases returns the releases waiting for a pass, by ring id, and forgets them.
func (t *leaderTerm) takeReleases() map[string][]*releaseReq {
	t.mu.Lock()
	reqs := t.releases
	t.releases = nil
	t.mu.Unlock()
	out := map[string][]*releaseReq{}
	for _, r := range reqs {
		id := fsm.RingID(r.rel.Ring)
		out[id] = append(out[id], r)
	}
	return out
}

// requeueReleases puts releases back for the next pass (their entry was refused as a whole).
func (t *leaderTerm) requeueReleases(reqs []*releaseReq) {
	t.mu.Lock()
	t.releases = append(t.releases, reqs...)
	t.mu.Unlock()
}

// commitAll proposes every command at once, at most passesInFlight in flight, and returns each
// one's error.
func (t *leaderTerm) commitAll(cmds []fsm.Command) []error {
	errs := make([]error, len(cmds))
	sem := make(chan struct{}, passesInFlight)
	var wg sync.WaitGroup
	for i, c := range cmds {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = t.apply(c)
		}()
	}
	wg.Wait()
	return errs
}

// commitPasses commits one entry per ring, concurrently, and handles each outcome as the
// one-by-one path does: a committed entry's decisions are marked proposed and its releases
// answered; a refused plan (ErrUnsafeAssignment) refuses the whole entry, so the pass is decided
// again shortly, its releases waiting for it; any other failure answers the releases with it.
func (t *leaderTerm) commitPasses(passes []ringPass, now time.Time, later func(time.Time)) {
	cmds := make([]fsm.Command, len(passes))
	for i, p := range passes {
		cmds[i] = p.command()
	}
	for i, err := range t.commitAll(cmds) {
		p := passes[i]
		switch {
		case err == nil:
			for _, c := range p.parts {
				t.markProposed(c, now)
				if _, ok := c.(*fsm.Expire); ok {
					t.n.metrics.expiriesSent.Add(1)
				}
			}
			for _, r := range p.releases {
				r.done <- nil
			}
			t.n.metrics.countMoved(p.entry.Ring, p.moved)
			t.log.Info().Str("ring", p.entry.Ring.String()).Stringer("command", cmds[i].Type()).
				Int("releases", len(p.entry.Releases)).Int("joins", len(p.entry.Joins)).Int("downs", len(p.entry.Downs)).
				Int("expires", len(p.entry.Expires)).Interface("args", cmds[i]).Msg("committed")
		case errors.Is(err, fsm.ErrUnsafeAssignment):
			t.log.Debug().Err(err).Str("ring", p.entry.Ring.String()).Msg("pass refused; deciding again")
			t.requeueReleases(p.releases)
			later(now.Add(50 * time.Millisecond))
		default:
			t.log.Warn().Err(err).Str("ring", p.entry.Ring.String()).Msg("pass proposal failed; retrying")
			for _, r := range p.releases {
				r.done <- err
			}
			later(now.Add(100 * time.Millisecond))
		}
	}
}
