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

// ringMembership keeps a worker in its ring only while its clock is trusted. When the clock
// monitor says untrusted (beyond max_clock_offset / 2 from Cassandra, or no fresh estimate), it
// leaves the ring at once: ring.leave frees every range for the others instead of letting them
// wait for the lease to expire, and the guard, cleared first, refuses every query and execution
// of the data plane. When the clock is trusted again it rejoins with a new lease client that
// feeds the same guard, under the same incarnation (the same process).
type ringMembership struct {
	// newClient makes the lease client of the next stretch of membership; incarnation is "" for
	// the first, then the first one's.
	newClient    func(incarnation string) (*leaseclient.Client, error)
	leaveTimeout time.Duration
	log          zerolog.Logger
	verdicts     chan clockcheck.Status // the latest verdict not yet acted on

	mu          sync.Mutex
	client      *leaseclient.Client // nil while out of the ring
	clientDone  chan error
	incarnation string
	stopped     bool
}

func newRingMembership(first *leaseclient.Client, newClient func(string) (*leaseclient.Client, error), leaveTimeout time.Duration, log zerolog.Logger) *ringMembership {
	m := &ringMembership{newClient: newClient, leaveTimeout: leaveTimeout, log: log, verdicts: make(chan clockcheck.Status, 1),
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

// clockChanged is the monitor's OnChange: it keeps the latest verdict for run and never blocks
// (OnChange calls never overlap, so the slot it empties is still empty when it fills it).
func (m *ringMembership) clockChanged(s clockcheck.Status) {
	select {
	case <-m.verdicts:
	default:
	}
	m.verdicts <- s
}

// run acts on each verdict until ctx ends: join when trusted, leave when not.
func (m *ringMembership) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-m.verdicts:
			if s.Trusted {
				m.join(ctx)
			} else {
				m.leave(s.Reason)
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
	m.log.Info().Str("incarnation", c.Incarnation()).Msg("joining the ring: the clock is trusted")
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
