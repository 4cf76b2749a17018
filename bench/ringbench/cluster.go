package main

import (
	"context"
	"fmt"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/wallclock"
)

// viewTimeout bounds one GET /v1/ring: a coordinator that was just killed must not hold a poll.
const viewTimeout = 500 * time.Millisecond

// cluster is the coordinators (a proc.Cluster without workers) and the probes of one run, all on
// loopback, all in the cluster's process group.
type cluster struct {
	*proc.Cluster
	probeBin  string
	probeArgs []string
	probes    []*probe
}

// addProbe launches probe p<i> and waits until it reported its start.
func (c *cluster) addProbe(ctx context.Context) (*probe, error) {
	id := fmt.Sprintf("p%d", len(c.probes)+1)
	args := []string{"-worker-id", id, "-coordinators", c.RSocketAddrs(),
		"-region", ring.Region, "-cluster", ring.Cluster, "-service", ring.Service}
	args = append(args, c.probeArgs...)
	p, err := c.Group.Launch(proc.Spec{Name: id, Path: c.probeBin, Args: args})
	if err != nil {
		return nil, err
	}
	pr := &probe{id: id, p: p}
	c.probes = append(c.probes, pr)
	return pr, c.waitStarted(ctx, pr, "")
}

// waitStarted waits until pr reported the start of an incarnation other than prev.
func (c *cluster) waitStarted(ctx context.Context, pr *probe, prev string) error {
	for {
		if err := pr.refresh(); err != nil {
			return err
		}
		if inc := pr.incarnation(); inc != "" && inc != prev {
			return nil
		}
		select {
		case <-pr.p.Exited():
			return fmt.Errorf("probe %s exited before it started: %s", pr.id, pr.p.Tail(5))
		case <-ctx.Done():
			return fmt.Errorf("probe %s did not start: %w", pr.id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// restartProbe launches an exited probe again (a new incarnation) and waits for its start.
func (c *cluster) restartProbe(ctx context.Context, pr *probe) error {
	prev := pr.incarnation()
	if err := pr.p.Restart(); err != nil {
		return err
	}
	return c.waitStarted(ctx, pr, prev)
}

// view fetches one coordinator's /v1/ring with a short bound.
func view(ctx context.Context, co *proc.Coordinator) (admin.RingView, error) {
	ctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	return co.View(ctx)
}

// memberOf finds a member incarnation in a view.
func memberOf(v admin.RingView, workerID, incarnation string) (admin.MemberView, bool) {
	r, ok := v.Ring(ring)
	if !ok {
		return admin.MemberView{}, false
	}
	for _, m := range r.Members {
		if m.WorkerID == workerID && m.Incarnation == incarnation {
			return m, true
		}
	}
	return admin.MemberView{}, false
}

// settled reports whether the ring is at rest: in the leader's view every probe's current
// incarnation is an active member holding exactly its equal share (lease.Split of the probe count,
// at its node index), nobody else is a member (no departed incarnation still holding anything),
// and each probe's guard holds that very assignment, still valid. The reason says what is missing.
func (c *cluster) settled(ctx context.Context) (bool, string) {
	_, v, err := c.Leader(ctx)
	if err != nil {
		return false, err.Error()
	}
	r, ok := v.Ring(ring)
	if !ok {
		return false, "ring not in the view"
	}
	n := len(c.probes)
	running := make(map[string]string, n)
	for _, pr := range c.probes {
		if err := pr.refresh(); err != nil {
			return false, err.Error()
		}
		running[pr.id] = pr.incarnation()
	}
	if err := r.AtRest(running); err != nil {
		return false, err.Error()
	}
	splits := lease.Split(n)
	byID := map[string]admin.MemberView{}
	for _, m := range r.Members {
		rs, err := lease.DecodeRanges(m.Ranges)
		if err != nil || !rs.Equal(lease.Ranges{splits[m.NodeIndex]}) {
			return false, fmt.Sprintf("member %s does not hold its equal share yet", m.WorkerID)
		}
		byID[m.WorkerID] = m
	}
	now := time.Now().UnixNano()
	for _, pr := range c.probes {
		m := byID[pr.id]
		recs := pr.leases(running[pr.id])
		if len(recs) == 0 {
			return false, fmt.Sprintf("probe %s holds no lease", pr.id)
		}
		last := recs[len(recs)-1]
		want, _ := lease.DecodeRanges(m.Ranges)
		if last.epoch != m.Epoch || !last.ranges.Equal(want) || last.expires <= now {
			return false, fmt.Sprintf("probe %s holds epoch %d, the leader assigned %d", pr.id, last.epoch, m.Epoch)
		}
	}
	return true, ""
}

// waitSettled waits until settled, at most bound.
func (c *cluster) waitSettled(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var why string
	for {
		var ok bool
		if ok, why = c.settled(ctx); ok {
			return nil
		}
		if !wallclock.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("ring not settled within %v: %s", bound, why)
		}
	}
}
