package leaseclient

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/retryring/retryring/lease"
)

// reporter sends ring.report (protocol.md section 7.1) beside the lease stream: every
// ReportPeriod, and at once after a new lease, so that the leader of a fresh connection (perhaps
// a new leader) does not read the worker as unknown for a whole period. A report is for people:
// one that fails is logged at debug and forgotten, and nothing about it touches the stream or the
// connection.
type reporter struct {
	c    *Client
	kick chan struct{}

	mu sync.Mutex
	// unsupported is the connection whose coordinator answered unknown_route (a version that
	// predates ring.report): no report goes out on it. A new connection, perhaps to an upgraded
	// node, tries again.
	unsupported *session
	told        bool // the unknown_route line was logged (once per process)
}

func newReporter(c *Client) *reporter {
	return &reporter{c: c, kick: make(chan struct{}, 1)}
}

// wake asks for a report now.
func (r *reporter) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run reports until ctx ends.
func (r *reporter) run(ctx context.Context) {
	if r.c.cfg.Report == nil {
		return
	}
	tick := time.NewTicker(r.c.cfg.ReportPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		}
		r.send(ctx)
	}
}

// send sends one report on the current connection, if there is one that takes reports.
func (r *reporter) send(ctx context.Context) {
	if r.c.isLeaving() {
		return // the connection is about to close: a request in flight would only race with that
	}
	sess := r.c.session()
	if sess == nil || r.stoppedOn(sess) {
		return
	}
	rep, ok := r.collect()
	if !ok {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, r.c.cfg.RequestTimeout)
	err := sess.ack(rctx, lease.RouteReport, rep)
	cancel()
	switch {
	case err == nil:
		r.c.stats.reports.Add(1)
	case errors.Is(err, lease.ErrUnknownRoute):
		r.mu.Lock()
		r.unsupported = sess
		first := !r.told
		r.told = true
		r.mu.Unlock()
		if first {
			r.c.log.Info().Str("coordinator_addr", sess.addr).
				Msg("the coordinator does not know ring.report (an older version): no reports on this connection")
		}
	case ctx.Err() == nil:
		r.c.log.Debug().Err(err).Str("coordinator_addr", sess.addr).Msg("report not delivered")
	}
}

// stoppedOn reports whether sess's coordinator does not take reports.
func (r *reporter) stoppedOn(sess *session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return sess == r.unsupported
}

// collect calls the Report hook; a panic or a report the coordinator would refuse sends nothing.
func (r *reporter) collect() (rep lease.Report, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.c.log.Error().Interface("panic", p).Msg("panic in Report")
			ok = false
		}
	}()
	rep = r.c.cfg.Report()
	rep.WorkerID = r.c.cfg.WorkerID
	if err := rep.Validate(); err != nil {
		r.c.log.Debug().Err(err).Msg("report not sent")
		return rep, false
	}
	return rep, true
}
