package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/worker/leaseclient"
)

// ringMembership keeps a worker in its ring only while it can work: its clock is trusted and
// Cassandra has not been lost for longer than --cassandra-lost-after. When the clock monitor says
// untrusted (beyond max_clock_offset / 2 from Cassandra, or no fresh estimate), or the Cassandra
// watch says lost, it leaves the ring at once: ring.leave frees every range for the others instead
// of letting them wait for the lease to expire, and the guard, cleared first, refuses every query
// and execution of the data plane. When both are good again it rejoins with a new lease client
// that feeds the same guard, under the same incarnation (the same process).
type ringMembership struct {
	// newClient makes the lease client of the next stretch of membership; incarnation is "" for
	// the first, then the first one's.
	newClient    func(incarnation string) (*leaseclient.Client, error)
	leaveTimeout time.Duration
	log          zerolog.Logger
	wake         chan struct{} // the gate changed since run last looked

	gateMu    sync.Mutex
	clock     clockcheck.Status
	clockSeen bool   // a first verdict arrived: before it the worker stays out
	lost      string // why Cassandra counts as lost; "" while it does not

	mu          sync.Mutex
	client      *leaseclient.Client // nil while out of the ring
	clientDone  chan error
	incarnation string
	stopped     bool
}

func newRingMembership(first *leaseclient.Client, newClient func(string) (*leaseclient.Client, error), leaveTimeout time.Duration, log zerolog.Logger) *ringMembership {
	m := &ringMembership{newClient: newClient, leaveTimeout: leaveTimeout, log: log, wake: make(chan struct{}, 1),
		incarnation: first.Incarnation()}
	m.newClient = func(inc string) (*leaseclient.Client, error) {
		if first != nil { // built up front, so that a bad configuration stops the worker at once
			c := first
			first = nil
			return c, nil
		}
		return newClient(inc)
	}
	return m
}

// clockChanged is the monitor's OnChange: it keeps the latest verdict for run and never blocks.
func (m *ringMembership) clockChanged(s clockcheck.Status) {
	m.gateMu.Lock()
	m.clock, m.clockSeen = s, true
	m.gateMu.Unlock()
	m.poke()
}

// cassandraChanged is the Cassandra watch's verdict: lost says why the worker must give its
// ranges back (Cassandra unreachable for longer than --cassandra-lost-after), "" that it may work.
func (m *ringMembership) cassandraChanged(lost string) {
	m.gateMu.Lock()
	m.lost = lost
	m.gateMu.Unlock()
	m.poke()
}

func (m *ringMembership) poke() {
	select {
	case m.wake <- struct{}{}:
	default: // run has not looked since the last change; it reads the latest state when it does
	}
}

// gate says whether the worker may be in its ring, and if not why ("" before the first clock
// verdict: nothing to say yet, nothing to leave).
func (m *ringMembership) gate() (open bool, reason string) {
	m.gateMu.Lock()
	defer m.gateMu.Unlock()
	switch {
	case !m.clockSeen:
		return false, ""
	case !m.clock.Trusted:
		return false, m.clock.Reason
	case m.lost != "":
		return false, m.lost
	}
	return true, ""
}

// run acts on each change of the gate until ctx ends: join when open, leave when not.
func (m *ringMembership) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
			if open, reason := m.gate(); open {
				m.join(ctx)
			} else {
				m.leave(reason)
			}
		}
	}
}

// join starts a lease client unless one runs.
func (m *ringMembership) join(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.client != nil || m.stopped {
		return
	}
	c, err := m.newClient(m.incarnation)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot make a lease client: the worker stays out of its ring")
		return
	}
	done := make(chan error, 1)
	// The client outlives the scanner's ctx: it must hold the lease while in-flight work ends.
	go func() { done <- c.Run(context.WithoutCancel(ctx)) }()
	m.client, m.clientDone = c, done
	m.log.Info().Str("incarnation", c.Incarnation()).Msg("joining the ring: the clock is trusted and Cassandra reachable")
}

// leave gives every range back, if the worker holds any: the guard is cleared, the work in flight
// drains, ring.leave is sent, and the client's Run ends.
func (m *ringMembership) leave(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaveLocked(reason)
}

func (m *ringMembership) leaveLocked(reason string) {
	if m.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.leaveTimeout)
	defer cancel()
	ev := m.log.Info()
	if reason != "" {
		ev = m.log.Warn().Str("reason", reason)
	}
	ev.Msg("leaving the ring")
	if err := m.client.Leave(ctx); err != nil {
		m.log.Warn().Err(err).Msg("leave failed; the coordinator frees the ranges when the lease expires")
	}
	select {
	case err := <-m.clientDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			m.log.Warn().Err(err).Msg("lease client ended with an error")
		}
	case <-ctx.Done():
	}
	m.client, m.clientDone = nil, nil
}

// stop leaves the ring for good (the worker is shutting down) and stops joining.
func (m *ringMembership) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	m.leaveLocked("")
}

// current is the lease client of this stretch of membership; nil while out of the ring.
func (m *ringMembership) current() *leaseclient.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.client
}
