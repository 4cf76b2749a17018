package ringtest

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/lease"
)

// The methods in this file read instants out of the history for benchmarks: how long the leader
// took to notice a dead worker, how long until a dead or leaving worker's ranges were usable by
// others, how long after a leader kill the lease streams resumed. Tests must not assert on them.

// Last returns the most recent event of kind (for worker, when worker is not empty).
func (c *Cluster) Last(kind EventKind, worker string) (Event, bool) {
	events := c.rec.Events()
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Kind == kind && (worker == "" || e.Worker == worker) {
			return e, true
		}
	}
	return Event{}, false
}

// FirstInstallAfter is the instant of w's first installed element at or after since.
func (c *Cluster) FirstInstallAfter(w *Worker, since time.Duration) (time.Duration, bool) {
	for _, e := range c.rec.Events() {
		if e.Kind == EventInstall && e.At >= since && e.Worker == w.ID && e.Incarnation == w.Incarnation {
			return e.At, true
		}
	}
	return 0, false
}

// WaitInstallAfter waits (bounded) for w's first element at or after since: after a leader kill,
// the moment w's lease stream resumed.
func (c *Cluster) WaitInstallAfter(w *Worker, since, timeout time.Duration) (time.Duration, error) {
	var at time.Duration
	err := poll(timeout, func() bool {
		var ok bool
		at, ok = c.FirstInstallAfter(w, since)
		return ok
	})
	if err != nil {
		return 0, fmt.Errorf("%s installed nothing after %v within %v", w.Holder(), since, timeout)
	}
	return at, nil
}

// LastRanges are the ranges of w's most recent element, and whether it was Node-0.
func (c *Cluster) LastRanges(w *Worker) (lease.Ranges, bool) {
	var last Interval
	found := false
	for _, iv := range c.rec.Intervals() {
		if iv.Holder() == w.Holder() && (!found || iv.From >= last.From) {
			last, found = iv, true
		}
	}
	return last.Ranges, last.Node0
}

// TakeoverAfter is the first instant at or after since at which every token of w's last element
// was usable by other holders (a crash or leave taken over), and whether that happened yet.
func (c *Cluster) TakeoverAfter(w *Worker, since time.Duration) (time.Duration, bool) {
	ranges, _ := c.LastRanges(w)
	return FirstCovered(c.rec.Intervals(), ranges, since, ExceptHolder(w.ID, w.Incarnation))
}

// WaitTakeover waits (bounded) for TakeoverAfter.
func (c *Cluster) WaitTakeover(w *Worker, since, timeout time.Duration) (time.Duration, error) {
	var at time.Duration
	err := poll(timeout, func() bool {
		var ok bool
		at, ok = c.TakeoverAfter(w, since)
		return ok
	})
	if err != nil {
		return 0, fmt.Errorf("ranges of %s not taken over within %v", w.Holder(), timeout)
	}
	return at, nil
}

// WaitMemberDown waits (bounded) until the leader's committed state no longer counts w as an active
// member (departed, or gone), notes EventMemberDown and returns its instant: the failure
// detection time, at the resolution of the harness's polling.
func (c *Cluster) WaitMemberDown(w *Worker, timeout time.Duration) (time.Duration, error) {
	err := poll(timeout, func() bool {
		l, err := c.WaitLeader(0)
		if err != nil {
			return false
		}
		return !memberActive(l.View(), c.opts.Ring, w)
	})
	if err != nil {
		return 0, fmt.Errorf("leader still counts %s active after %v", w.Holder(), timeout)
	}
	return c.rec.Note(Event{Kind: EventMemberDown, Worker: w.ID, Incarnation: w.Incarnation}), nil
}

func memberActive(v coordinator.RingView, ring lease.RingKey, w *Worker) bool {
	r, ok := ringView(v, ring)
	if !ok {
		return false
	}
	for _, m := range r.Members {
		if m.WorkerID == w.ID && m.Incarnation == w.Incarnation {
			return m.State != coordinator.MemberDeparted
		}
	}
	return false
}
