package leaseclient

import (
	"context"
	"fmt"

	"github.com/retryring/retryring/lease"
)

// Leave leaves the ring gracefully and stops Run: the Guard is cleared first (nothing new starts on
// any range), then Drain runs with an empty new lease, then ring.leave frees every range at the
// coordinator. The Guard is cleared before ring.leave, not after, because the coordinator may hand
// the ranges on as soon as it has committed the leave. If Drain fails, no ring.leave is sent (the
// ranges become free at expiry). Without a connection Leave returns ErrNotConnected, and the lease
// simply expires. The client cannot be used after Leave.
func (c *Client) Leave(ctx context.Context) error {
	c.mu.Lock()
	if c.leaving {
		c.mu.Unlock()
		return ErrClosed
	}
	c.leaving = true
	sess := c.sess
	old, had := c.guard.Current()
	c.guard.Clear()
	c.mu.Unlock()
	c.rel.cancel()

	err := func() error {
		if had {
			// No ranges, and NodeIndex -1 because 0 would mean Node-0.
			empty := lease.Lease{WorkerID: old.WorkerID, Ring: old.Ring, Epoch: old.Epoch, NodeIndex: -1, NodeCount: old.NodeCount}
			if err := c.drain(ctx, old, empty); err != nil {
				return fmt.Errorf("leaseclient: drain failed, ring.leave not sent (the ranges become free at expiry): %w", err)
			}
		}
		if sess == nil {
			return ErrNotConnected
		}
		if err := sess.ack(ctx, lease.RouteLeave, lease.LeaveRequest{WorkerID: c.cfg.WorkerID}); err != nil {
			return err
		}
		c.log.Info().Msg("left the ring")
		return nil
	}()
	c.stopOnce.Do(func() { close(c.stop) })
	if c.started.Load() {
		select {
		case <-c.runDone:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	}
	return err
}

// View returns the ring view (the JSON of GET /v1/ring) from the coordinator this client is
// connected to.
func (c *Client) View(ctx context.Context) ([]byte, error) {
	sess := c.session()
	if sess == nil {
		return nil, ErrNotConnected
	}
	return sess.call(ctx, lease.RouteView, struct{}{})
}
