package leaseclient

import (
	"time"

	"github.com/retryring/retryring/lease"
)

// Element is one lease element as the client installed it, with what the Lease alone does not
// say: which connection it came on and when. A benchmark or a test harness that runs many clients
// needs it to tell which coordinator renewed a worker after a failover, and how old a lease was
// when it arrived; the data plane never does (it asks the Guard).
type Element struct {
	// Lease is the element as installed in the Guard.
	Lease lease.Lease
	// Coordinator is the RSocket address of the connection the element arrived on: the address the
	// client dialled, which after a not_leader redirect is the leader address the redirect named.
	Coordinator string
	// Received is the client's clock (Config.Clock) just after the Guard installed the element;
	// Received − Lease.ValidFrom is how long the demand waited for its answer.
	Received time.Time
}

// onElement calls the OnElement hook; a panic is logged and forgotten, as for OnLease.
func (c *Client) onElement(l lease.Lease, addr string) {
	if c.cfg.OnElement == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Interface("panic", r).Msg("panic in OnElement")
		}
	}()
	c.cfg.OnElement(Element{Lease: l, Coordinator: addr, Received: c.cfg.Clock.Now()})
}
