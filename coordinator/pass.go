package coordinator

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retryring/retryring/coordinator/leader"
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

// takeReleases returns the releases waiting for a pass, in the order they came, and forgets them.
func (t *leaderTerm) takeReleases() []*releaseReq {
	t.mu.Lock()
	defer t.mu.Unlock()
	reqs := t.releases
	t.releases = nil
	return reqs
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
func (t *leaderTerm) commitPasses(passes []leader.Pass, reqs []*releaseReq, now time.Time, later func(time.Time)) {
	cmds := make([]fsm.Command, len(passes))
	for i, p := range passes {
		cmds[i] = p.Command()
	}
	for i, err := range t.commitAll(cmds) {
		p := passes[i]
		releases := make([]*releaseReq, len(p.Releases))
		for j, k := range p.Releases {
			releases[j] = reqs[k]
		}
		switch {
		case err == nil:
			for _, c := range p.Parts {
				t.recent.Mark(c, now)
				if _, ok := c.(*fsm.Expire); ok {
					t.n.metrics.expiriesSent.Add(1)
				}
			}
			for _, r := range releases {
				r.done <- nil
			}
			t.n.metrics.countMoved(p.Entry.Ring, p.Moved)
			t.log.Info().Str("ring", p.Entry.Ring.String()).Stringer("command", cmds[i].Type()).
				Int("releases", len(p.Entry.Releases)).Int("joins", len(p.Entry.Joins)).Int("downs", len(p.Entry.Downs)).
				Int("expires", len(p.Entry.Expires)).Interface("args", cmds[i]).Msg("committed")
		case errors.Is(err, fsm.ErrUnsafeAssignment):
			t.log.Debug().Err(err).Str("ring", p.Entry.Ring.String()).Msg("pass refused; deciding again")
			t.requeueReleases(releases)
			later(now.Add(50 * time.Millisecond))
		default:
			t.log.Warn().Err(err).Str("ring", p.Entry.Ring.String()).Msg("pass proposal failed; retrying")
			for _, r := range releases {
				r.done <- err
			}
			later(now.Add(100 * time.Millisecond))
		}
	}
}
