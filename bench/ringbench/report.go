package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/worker/leaseclient"
)

// row is one line of the figure table.
type row struct {
	fig, what, span, target string
}

func rows(t lease.Timing) []row {
	return []row{
		{figStopDetect, "silent worker detected", "SIGSTOP of a probe → the leader's `GET /v1/ring` shows its member `departed`", "< 1 s"},
		{figKillDetect, "crashed worker detected", "kill -9 of a probe → its member `departed`", "< 1 s"},
		{figTakeover, "takeover", "kill -9 of a probe → the survivors' valid leases cover the whole ring again", fmt.Sprintf("TTL + 1 s = %v", t.TTL+time.Second)},
		{figLeaveUsable, "graceful leave", "the probe calls Leave (on SIGTERM) → every range it held is in another probe's installed lease", "< 300 ms"},
		{figLeaveRing, "graceful leave, whole ring", "Leave called → the survivors' valid leases cover the whole ring", "—"},
		{figElected, "leader kill: election", "kill -9 of the leader coordinator → another coordinator's `/v1/ring` names itself leader", "—"},
		{figFirstNew, "leader kill: new leader streams", "kill -9 of the leader → first lease element from another coordinator installed by any probe", "< 2 s"},
		{figAllNew, "leader kill: every probe renewed", "kill -9 of the leader → the last probe's first element from the new leader", "—"},
		{figLeaderMargin, "leader kill: least lease left", "at each probe's first element from the new leader, the validity its guard still had (least over the probes, per trial)", "> 0"},
	}
}

// baselineRow is the baseline's line, the same whatever the timing.
var baselineRow = row{figBaseline, "**baseline**: plain rsocket-go server", "SIGSTOP of a client (the lease client's keepalive) → the server's `OnClose` (no read-deadline cap; run in parallel with the trials above)", "(≈ 90 s expected)"}

// fmtDur prints milliseconds below 10 s and seconds above.
func fmtDur(d time.Duration) string {
	if d >= 10*time.Second || d <= -10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// renderReport is the report of a run: the command and the machine, then per timing its table
// and raw values, then (with two timings or more) the figures side by side, then the baseline.
func renderReport(m benchkit.Run, o options, runs []timingRun, base *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "command: `%s`\n\n", m.Command)
	fmt.Fprintf(&b, "date: %s; machine: %d CPUs (%s), kernel %s, %s; load average %s at the start, %s at the end\n\n",
		m.When.Format(time.RFC3339), m.CPUs, m.CPUModel, m.Kernel, runtime.Version(), m.LoadAvgFrom, m.LoadEnd)
	backoff := leaseclient.Backoff{Min: leaseclient.DefaultBackoffMin, Max: leaseclient.DefaultBackoffMax}
	backoffSource := "the lease client's defaults"
	if o.probeBackoffMax > 0 {
		backoff.Max, backoffSource = o.probeBackoffMax, "Max set by -probe-backoff-max"
	}
	fmt.Fprintf(&b, "probes: worker/leaseclient, keepalive %v, reconnect backoff full jitter in [0, min(%v, %v×2^n)) (%s)\n\n",
		leaseclient.DefaultKeepalive, backoff.Max, backoff.Min, backoffSource)
	for _, run := range runs {
		renderTiming(&b, o, run)
	}
	if len(runs) > 1 {
		renderSideBySide(&b, o, runs)
	}
	if vals, to := base.vals[figBaseline], base.timeouts[figBaseline]; len(vals) > 0 || to > 0 {
		r := baselineRow
		s := summarize(vals, to)
		fmt.Fprintf(&b, "\n| figure | measured from → to | expected | trials | median | p99 | min | max |\n|---|---|---|---|---|---|---|---|\n")
		if s.N == 0 {
			fmt.Fprintf(&b, "| %s | %s | %s | %d timed out | — | — | — | — |\n", r.what, r.span, r.target, to)
		} else {
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s |\n", r.what, r.span, r.target, s.N,
				fmtDur(s.Median), fmtDur(s.P99), fmtDur(s.Min), fmtDur(s.Max))
		}
		rawValues(&b, []row{baselineRow}, base)
		for _, n := range base.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// renderTiming is one timing's table, notes and raw values.
func renderTiming(b *strings.Builder, o options, run timingRun) {
	t, res := run.spec.t, run.res
	fmt.Fprintf(b, "#### Timing %q\n\n", run.spec.name)
	fmt.Fprintf(b, "cluster: %d `retryring coordinator` processes and %d `leaseprobe` processes on loopback, one ring; "+
		"lease TTL %v, renewal %v, silence timeout %v, Raft heartbeat/election %v/%v, leader lease %v, Raft log fsync on\n\n",
		o.coordinators, o.probes, t.TTL, t.Renewal, silenceTimeout(o), coordinator.DefaultHeartbeatTimeout,
		coordinator.DefaultElectionTimeout, coordinator.DefaultLeaderLeaseTimeout)
	fmt.Fprintf(b, "| figure | measured from → to | target | trials | median | p99 | min | max |\n")
	fmt.Fprintf(b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows(t) {
		vals, to := res.vals[r.fig], res.timeouts[r.fig]
		if len(vals) == 0 && to == 0 {
			continue
		}
		s := summarize(vals, to)
		n := fmt.Sprintf("%d", s.N)
		if to > 0 {
			n += fmt.Sprintf(" + %d timed out", to)
		}
		if s.N == 0 {
			fmt.Fprintf(b, "| %s | %s | %s | %s | — | — | — | — |\n", r.what, r.span, r.target, n)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.what, r.span, r.target, n,
			fmtDur(s.Median), fmtDur(s.P99), fmtDur(s.Min), fmtDur(s.Max))
	}
	if len(res.lost) > 0 {
		lostRow(b, o, res)
	}
	fmt.Fprintf(b, "\np99 is the nearest rank: with fewer than 100 trials it is the maximum. Median: the mean of the two middle values.\n")
	if len(res.notes) > 0 {
		fmt.Fprintf(b, "\nnotes:\n")
		for _, n := range res.notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	fmt.Fprintf(b, "\nraw values (ms, sorted):\n")
	rawValues(b, rows(t), res)
	if len(res.lost) > 0 {
		fmt.Fprintf(b, "- %s (per trial): %v\n", figLeaderLost, res.lost)
	}
	fmt.Fprintln(b)
}

// rawValues prints every value of the figures of rs that res holds, sorted.
func rawValues(b *strings.Builder, rs []row, res *results) {
	for _, r := range rs {
		if vals := res.vals[r.fig]; len(vals) > 0 {
			s := append([]time.Duration(nil), vals...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			parts := make([]string, len(s))
			for i, v := range s {
				parts[i] = fmt.Sprintf("%.0f", float64(v)/float64(time.Millisecond))
			}
			fmt.Fprintf(b, "- %s: %s\n", r.fig, strings.Join(parts, " "))
		}
	}
}

// renderSideBySide puts every timing's median, p99 and max of each figure in one row, with the
// target each timing sets for it.
func renderSideBySide(b *strings.Builder, o options, runs []timingRun) {
	fmt.Fprintf(b, "#### Side by side\n\n| figure |")
	for _, run := range runs {
		fmt.Fprintf(b, " %s: target | median | p99 | max |", run.spec.name)
	}
	fmt.Fprintf(b, "\n|---|")
	for range runs {
		fmt.Fprintf(b, "---|---|---|---|")
	}
	fmt.Fprintln(b)
	for i, r := range rows(runs[0].spec.t) {
		fmt.Fprintf(b, "| %s |", r.what)
		for _, run := range runs {
			s := summarize(run.res.vals[r.fig], run.res.timeouts[r.fig])
			target := rows(run.spec.t)[i].target
			if s.N == 0 {
				fmt.Fprintf(b, " %s | — | — | — |", target)
				continue
			}
			to := ""
			if s.Timeouts > 0 {
				to = fmt.Sprintf(" (+%d timed out)", s.Timeouts)
			}
			fmt.Fprintf(b, " %s | %s%s | %s | %s |", target, fmtDur(s.Median), to, fmtDur(s.P99), fmtDur(s.Max))
		}
		fmt.Fprintln(b)
	}
	fmt.Fprintf(b, "| leader kill: probes that lost their lease |")
	for _, run := range runs {
		total := 0
		for _, l := range run.res.lost {
			total += l
		}
		fmt.Fprintf(b, " none | %d of %d probe-trials | | |", total, len(run.res.lost)*o.probes)
	}
	fmt.Fprintf(b, "\n\n")
}

// lostRow is the table row counting probes whose lease ran out during a leader failover.
func lostRow(b *strings.Builder, o options, res *results) {
	total, worst := 0, 0
	for _, l := range res.lost {
		total += l
		worst = max(worst, l)
	}
	fmt.Fprintf(b, "| leader kill: probes that lost their lease | kill -9 of the leader → each probe's first element from the new leader: "+
		"was there an instant with no valid lease in its guard? | none | %d | %d probe-trials of %d in all; at most %d in one trial | | | |\n",
		len(res.lost), total, len(res.lost)*o.probes, worst)
}
