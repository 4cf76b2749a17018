package leaseclient

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retryring/retryring/lease"
)

// releaser runs the Drain hook and then ring.release after an epoch that dropped tokens. It works
// beside the lease stream, so that a slow drain never delays the next demand.
type releaser struct {
	c    *Client
	kick chan struct{}

	mu  sync.Mutex
	job *releaseJob
}

// releaseJob is the pending release. old is the lease held before the first shrinking epoch not yet
// released; new is the latest shrinking epoch. gen counts changes, so that a job that moved on while
// the drain ran is drained again rather than released.
type releaseJob struct {
	old, new lease.Lease
	drained  bool
	gen      uint64
}

func newReleaser(c *Client) *releaser {
	return &releaser{c: c, kick: make(chan struct{}, 1)}
}

// add records that new dropped tokens of old; the Guard already holds new.
func (r *releaser) add(old, new lease.Lease) {
	r.mu.Lock()
	if r.job == nil {
		r.job = &releaseJob{old: old}
	}
	r.job.new = new
	r.job.drained = false
	r.job.gen++
	r.mu.Unlock()
	r.wake()
}

// cancel forgets the pending release (ring.leave supersedes it).
func (r *releaser) cancel() {
	r.mu.Lock()
	r.job = nil
	r.mu.Unlock()
}

// wake makes run look at the job again (a new job, or a new connection to send it on).
func (r *releaser) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run works until ctx ends. A failed release is retried after a backoff or on the next connection.
func (r *releaser) run(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	attempt := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry.C:
		}
		if r.step(ctx) {
			attempt = 0
			continue
		}
		retry.Reset(r.c.cfg.Backoff.delay(attempt, rand.Float64()))
		attempt++
	}
}

// step drains and releases the pending job. It returns false when the release should be retried.
func (r *releaser) step(ctx context.Context) bool {
	for {
		r.mu.Lock()
		job := r.job
		if job == nil {
			r.mu.Unlock()
			return true
		}
		snap := *job
		r.mu.Unlock()

		if snap.old.Remaining(r.c.cfg.Clock.Now()) <= 0 {
			// The old lease has run out: nothing can still use it, and the coordinator frees its
			// ranges by expiry whatever we send.
			r.finish(job, snap.gen)
			return true
		}
		if !snap.drained {
			err := r.c.drain(ctx, snap.old, snap.new)
			r.mu.Lock()
			switch {
			case r.job != job || job.gen != snap.gen:
				r.mu.Unlock()
				continue // a newer epoch arrived meanwhile: drain towards it
			case err != nil:
				r.job = nil
				r.mu.Unlock()
				r.c.log.Warn().Err(err).Uint64("epoch", snap.new.Epoch).Uint64("old_epoch", snap.old.Epoch).
					Msg("drain failed: no release, the dropped ranges become free when the old lease expires")
				return true
			}
			job.drained = true
			r.mu.Unlock()
		}

		sess := r.c.session()
		if sess == nil {
			return true // the next connection wakes us
		}
		rctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
		err := sess.ack(rctx, lease.RouteRelease, lease.ReleaseRequest{WorkerID: r.c.cfg.WorkerID, Epoch: snap.new.Epoch})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.c.log.Warn().Err(err).Uint64("epoch", snap.new.Epoch).Str("coordinator_addr", sess.addr).
					Msg("release failed, will retry")
			}
			return false
		}
		r.c.stats.releases.Add(1)
		r.c.log.Info().Uint64("epoch", snap.new.Epoch).Uint64("old_epoch", snap.old.Epoch).
			Stringer("released_ranges", snap.old.Ranges.Subtract(snap.new.Ranges)).Msg("released")
		if !r.finish(job, snap.gen) {
			continue
		}
		return true
	}
}

// finish drops job if it has not changed since gen; it reports whether it did.
func (r *releaser) finish(job *releaseJob, gen uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.job != job || job.gen != gen {
		return r.job == nil
	}
	r.job = nil
	return true
}
