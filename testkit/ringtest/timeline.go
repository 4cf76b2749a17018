package ringtest

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// The methods in this file read instants out of the recorded history, so that a test can order
// what happened (a crash, the leader noticing it, the takeover) without asserting how long any of
// it took.

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

// WaitAnswerAfter waits (bounded) for w's first installed element that answers a demand sent at
// or after since: after a leader kill, the new leader's first element (one of the killed leader's,
// still in flight, answers an earlier demand).
func (c *Cluster) WaitAnswerAfter(w *Worker, since, timeout time.Duration) (time.Duration, error) {
	var at time.Duration
	err := poll(timeout, func() bool {
		for _, e := range c.rec.Events() {
			if e.Kind == EventInstall && e.Demanded >= since && e.Worker == w.ID && e.Incarnation == w.Incarnation {
				at = e.At
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("%s installed no answer to a demand sent after %v within %v", w.Holder(), since, timeout)
	}
	return at, nil
}

// WaitInstallAfter waits (bounded) for w's first installed element at or after since: after a
// leader kill, the moment w's lease stream resumed.
func (c *Cluster) WaitInstallAfter(w *Worker, since, timeout time.Duration) (time.Duration, error) {
	var at time.Duration
	err := poll(timeout, func() bool {
		for _, e := range c.rec.Events() {
			if e.Kind == EventInstall && e.At >= since && e.Worker == w.ID && e.Incarnation == w.Incarnation {
				at = e.At
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("%s installed nothing after %v within %v", w.Holder(), since, timeout)
	}
	return at, nil
}

// WaitTakeover waits (bounded) for the first instant at or after since at which every token of
// w's last element was usable by other holders: a crash or a leave taken over.
func (c *Cluster) WaitTakeover(w *Worker, since, timeout time.Duration) (time.Duration, error) {
	var at time.Duration
	err := poll(timeout, func() bool {
		ivs := c.rec.Intervals()
		var ok bool
		at, ok = FirstCovered(ivs, lastRanges(ivs, w), since, ExceptHolder(w.ID, w.Incarnation))
		return ok
	})
	if err != nil {
		return 0, fmt.Errorf("ranges of %s not taken over within %v", w.Holder(), timeout)
	}
	return at, nil
}

// lastRanges are the ranges of w's most recent element.
func lastRanges(ivs []Interval, w *Worker) lease.Ranges {
	var last Interval
	found := false
	for _, iv := range ivs {
		if iv.Holder() == w.Holder() && (!found || iv.From >= last.From) {
			last, found = iv, true
		}
	}
	return last.Ranges
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

func memberActive(v admin.RingView, ring lease.RingKey, w *Worker) bool {
	r, ok := v.Ring(ring)
	if !ok {
		return false
	}
	for _, m := range r.Members {
		if m.WorkerID == w.ID && m.Incarnation == w.Incarnation {
			return m.State != admin.MemberDeparted
		}
	}
	return false
}
