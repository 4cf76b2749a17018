package main

import (
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retryring/retryring/bench/leaseprobe/event"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
)

// Bounds of one trial's waits. Each is several times the figure's target: a trial that reaches one
// is counted as a timeout, not dropped.
const (
	detectBound   = 10 * time.Second
	takeoverBound = 20 * time.Second
	leaveBound    = 10 * time.Second
	failoverBound = 15 * time.Second
	settleBound   = 60 * time.Second
	restartBound  = 60 * time.Second
	termWait      = 10 * time.Second
)

// Names of the figures, in the order of the report.
const (
	figStopDetect   = "stop_detect"
	figKillDetect   = "kill_detect"
	figTakeover     = "takeover"
	figLeaveUsable  = "leave_usable"
	figLeaveRing    = "leave_ring"
	figElected      = "leader_elected"
	figFirstNew     = "leader_first_lease"
	figAllNew       = "leader_all_leases"
	figBaseline     = "baseline_onclose"
	figLeaderLost   = "leader_lost"   // counts, not durations
	figLeaderMargin = "leader_margin" // least lease left at a probe's first element from the new leader
)

// results collects every trial's values, per figure.
type results struct {
	vals     map[string][]time.Duration
	timeouts map[string]int
	lost     []int // per leader-kill trial: probes whose lease ran out
	notes    []string
}

func newResults() *results {
	return &results{vals: map[string][]time.Duration{}, timeouts: map[string]int{}}
}

func (r *results) add(fig string, d time.Duration) { r.vals[fig] = append(r.vals[fig], d) }
func (r *results) timeout(fig string)              { r.timeouts[fig]++ }
func (r *results) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// runner runs trials on a settled cluster.
type runner struct {
	c       *cluster
	res     *results
	poll    time.Duration
	renewal time.Duration
	log     func(format string, args ...any)
}

// dephase waits a random fraction of a renewal period, so that faults do not fall at one phase of
// the coordinator's renewal tick (the takeover time depends on it).
func (r *runner) dephase(ctx context.Context) {
	wallclock.Sleep(ctx, time.Duration(rand.Int64N(int64(r.renewal))))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

// survivors returns the lease history of every probe but skip, for its current incarnation.
func (r *runner) survivors(skip *probe) (map[string][]leaseRec, error) {
	h := map[string][]leaseRec{}
	for _, pr := range r.c.probes {
		if pr == skip {
			continue
		}
		if err := pr.refresh(); err != nil {
			return nil, err
		}
		h[pr.id] = pr.leases(pr.incarnation())
	}
	return h, nil
}

// waitDeparted polls the leader's view until the member incarnation is departed; it returns the
// time the answer that showed it arrived (an upper bound: the state changed between the previous
// poll and that answer).
func (r *runner) waitDeparted(ctx context.Context, leader *proc.Coordinator, pr *probe, inc string, t0 time.Time) (time.Time, bool) {
	for time.Since(t0) < detectBound && ctx.Err() == nil {
		v, err := view(ctx, leader)
		at := time.Now()
		if err == nil {
			if m, ok := memberOf(v, pr.id, inc); ok && m.State == admin.MemberDeparted {
				return at, true
			}
		}
		wallclock.Sleep(ctx, r.poll)
	}
	return time.Time{}, false
}

// detect is one trial of silent-worker detection (kill false: SIGSTOP, then SIGCONT) or of
// crashed-worker detection and takeover (kill true: kill -9, then a restart as a new incarnation).
func (r *runner) detect(ctx context.Context, i int, kill bool) error {
	pr := r.c.probes[i%len(r.c.probes)]
	if err := pr.refresh(); err != nil {
		return err
	}
	inc := pr.incarnation()
	leader, _, err := r.c.Leader(ctx)
	if err != nil {
		return err
	}
	r.dephase(ctx)

	fault := make(chan error, 1)
	t0 := time.Now()
	if kill {
		go func() { fault <- pr.p.Kill9() }() // Kill9 also waits for the reap: poll meanwhile
	} else {
		fault <- pr.p.Stop()
	}
	at, ok := r.waitDeparted(ctx, leader, pr, inc, t0)
	fig := figStopDetect
	if kill {
		fig = figKillDetect
	}
	if ok {
		r.res.add(fig, at.Sub(t0))
	} else {
		r.res.timeout(fig)
	}
	if err := <-fault; err != nil {
		return err
	}
	line := fmt.Sprintf("%s %2d %s: detected %s", fig, i+1, pr.id, ms(at.Sub(t0)))
	if !ok {
		line = fmt.Sprintf("%s %2d %s: not detected within %v", fig, i+1, pr.id, detectBound)
	}

	if kill {
		took, ok, err := r.waitCovered(ctx, pr, t0.UnixNano(), lease.Ranges{lease.FullRing}, takeoverBound)
		if err != nil {
			return err
		}
		if ok {
			r.res.add(figTakeover, took)
			line += fmt.Sprintf(", ring covered again after %s", ms(took))
		} else {
			r.res.timeout(figTakeover)
			line += fmt.Sprintf(", ring not covered within %v", takeoverBound)
		}
		rctx, cancel := context.WithTimeout(ctx, restartBound)
		err = r.c.restartProbe(rctx, pr)
		cancel()
		if err != nil {
			return err
		}
	} else if err := pr.p.Cont(); err != nil {
		return err
	}
	r.log("%s", line)
	return r.c.waitSettled(ctx, settleBound)
}

// waitCovered waits until the probes other than skip, together, hold valid leases on every token of
// want, counting from from (ns); it returns how long after from that happened.
func (r *runner) waitCovered(ctx context.Context, skip *probe, from int64, want lease.Ranges, bound time.Duration) (time.Duration, bool, error) {
	for ctx.Err() == nil {
		h, err := r.survivors(skip)
		if err != nil {
			return 0, false, err
		}
		now := time.Now().UnixNano()
		if t, ok := firstCovered(h, from, now, want); ok {
			return time.Duration(t - from), true, nil
		}
		if time.Duration(now-from) > bound {
			return 0, false, nil
		}
		wallclock.Sleep(ctx, r.poll)
	}
	return 0, false, ctx.Err()
}

// leave is one trial of a graceful leave: SIGTERM makes the probe call Leave; measured from that
// call (the probe's leave_start) until the ranges it held are in other probes' installed, valid
// leases, and until the whole ring is.
func (r *runner) leave(ctx context.Context, i int) error {
	pr := r.c.probes[i%len(r.c.probes)]
	if err := pr.refresh(); err != nil {
		return err
	}
	inc := pr.incarnation()
	recs := pr.leases(inc)
	if len(recs) == 0 {
		return fmt.Errorf("probe %s holds no lease before its leave", pr.id)
	}
	held := recs[len(recs)-1].ranges
	r.dephase(ctx)

	termed := make(chan error, 1)
	sent := time.Now()
	go func() { termed <- pr.p.Term(termWait) }()
	var start event.Event
	for {
		if err := pr.refresh(); err != nil {
			return err
		}
		var ok bool
		if start, ok = pr.find(event.LeaveStart, inc, 0); ok {
			break
		}
		if time.Since(sent) > leaveBound {
			return fmt.Errorf("probe %s did not start leaving within %v of SIGTERM", pr.id, leaveBound)
		}
		wallclock.Sleep(ctx, r.poll)
	}
	line := fmt.Sprintf("leave %2d %s:", i+1, pr.id)
	usable, ok, err := r.waitCovered(ctx, pr, start.AtNs, held, leaveBound)
	if err != nil {
		return err
	}
	if ok {
		r.res.add(figLeaveUsable, usable)
		line += fmt.Sprintf(" its ranges usable by others after %s", ms(usable))
	} else {
		r.res.timeout(figLeaveUsable)
		line += fmt.Sprintf(" its ranges not taken within %v", leaveBound)
	}
	whole, ok, err := r.waitCovered(ctx, pr, start.AtNs, lease.Ranges{lease.FullRing}, leaveBound)
	if err != nil {
		return err
	}
	if ok {
		r.res.add(figLeaveRing, whole)
		line += fmt.Sprintf(", whole ring after %s", ms(whole))
	} else {
		r.res.timeout(figLeaveRing)
	}
	if err := <-termed; err != nil {
		r.res.note("leave trial %d: probe %s exit: %v", i+1, pr.id, err)
	}
	if pr.refresh() == nil {
		if done, ok := pr.find(event.LeaveDone, inc, 0); ok && done.Error != "" {
			r.res.note("leave trial %d: probe %s: Leave returned %s", i+1, pr.id, done.Error)
		}
	}
	r.log("%s", line)
	rctx, cancel := context.WithTimeout(ctx, restartBound)
	err = r.c.restartProbe(rctx, pr)
	cancel()
	if err != nil {
		return err
	}
	return r.c.waitSettled(ctx, settleBound)
}

// leaderKill is one trial of a leader failover: kill -9 of the leader coordinator; measured until a
// coordinator reports itself leader, until the first lease element from another coordinator reaches
// any probe, and until every probe got one; and whether any probe's guard had no valid lease at any
// instant in between (from the kill to its own first element from the new leader).
func (r *runner) leaderKill(ctx context.Context, i int) error {
	old, _, err := r.c.Leader(ctx)
	if err != nil {
		return err
	}
	incs := map[*probe]string{}
	for _, pr := range r.c.probes {
		if err := pr.refresh(); err != nil {
			return err
		}
		incs[pr] = pr.incarnation()
	}
	r.dephase(ctx)

	killed := make(chan error, 1)
	t0 := time.Now()
	go func() { killed <- old.Kill9() }()
	from := t0.UnixNano()
	var elected time.Time
	first := map[*probe]int64{}
	for time.Since(t0) < failoverBound && ctx.Err() == nil {
		if elected.IsZero() {
			for _, co := range r.c.Coordinators() {
				if co == old {
					continue
				}
				if v, err := view(ctx, co); err == nil && v.LeaderID == co.ID {
					elected = time.Now()
				}
			}
		}
		for _, pr := range r.c.probes {
			if _, ok := first[pr]; ok {
				continue
			}
			if err := pr.refresh(); err != nil {
				return err
			}
			for _, rec := range pr.leases(incs[pr]) {
				if rec.at > from && rec.addr != old.RSocketAddr {
					first[pr] = rec.at
					break
				}
			}
		}
		if !elected.IsZero() && len(first) == len(r.c.probes) {
			break
		}
		wallclock.Sleep(ctx, r.poll)
	}
	if err := <-killed; err != nil {
		return err
	}
	line := fmt.Sprintf("leader %2d %s:", i+1, old.ID)
	if !elected.IsZero() {
		r.res.add(figElected, elected.Sub(t0))
		line += fmt.Sprintf(" new leader seen after %s,", ms(elected.Sub(t0)))
	} else {
		r.res.timeout(figElected)
	}
	var earliest, latest int64
	for _, at := range first {
		if earliest == 0 || at < earliest {
			earliest = at
		}
		latest = max(latest, at)
	}
	if len(first) > 0 {
		r.res.add(figFirstNew, time.Duration(earliest-from))
		line += fmt.Sprintf(" first lease from it after %s,", ms(time.Duration(earliest-from)))
	} else {
		r.res.timeout(figFirstNew)
	}
	if len(first) == len(r.c.probes) {
		r.res.add(figAllNew, time.Duration(latest-from))
		line += fmt.Sprintf(" all %d probes after %s,", len(first), ms(time.Duration(latest-from)))
	} else {
		r.res.timeout(figAllNew)
	}
	lost := 0
	var lostDetail []string
	margin := time.Duration(-1)
	now := time.Now().UnixNano()
	for _, pr := range r.c.probes {
		recs := pr.leases(incs[pr])
		to, ok := first[pr]
		if !ok {
			to = now
		}
		if at, gap := firstGap(recs, from, to); gap {
			lost++
			left := "none"
			if held, ok := validAt(recs, from); ok {
				left = ms(time.Duration(held.expires - from))
			}
			detail := fmt.Sprintf("%s: lease left at the kill %s, no lease from %s", pr.id, left, ms(time.Duration(at-from)))
			if ok {
				detail += fmt.Sprintf(" to %s", ms(time.Duration(to-from)))
			}
			lostDetail = append(lostDetail, detail)
		}
		if ok {
			// The lease the probe held when its first element from the new leader arrived.
			if prev, valid := validAt(recs, to-1); valid {
				left := time.Duration(prev.expires - to)
				if margin < 0 || left < margin {
					margin = left
				}
			}
		}
	}
	r.res.lost = append(r.res.lost, lost)
	if margin >= 0 {
		r.res.add(figLeaderMargin, margin)
	}
	left := "none (every lease ran out)"
	if margin >= 0 {
		left = ms(margin)
	}
	line += fmt.Sprintf(" %d probes lost their lease, least lease left %s", lost, left)
	r.log("%s", line)
	for _, d := range lostDetail {
		r.log("    %s", d)
	}

	rctx, cancel := context.WithTimeout(ctx, restartBound)
	defer cancel()
	if err := old.Restart(); err != nil {
		return err
	}
	if err := old.WaitHealthy(rctx); err != nil {
		return err
	}
	if err := old.WaitReady(rctx); err != nil {
		return err
	}
	return r.c.waitSettled(ctx, settleBound)
}

// benchkit.Logf prints a progress line on stderr.
