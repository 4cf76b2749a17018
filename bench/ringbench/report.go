package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/bench/internal/benchkit"
	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/worker/leaseclient"
)

// machine is where and when the figures were measured.
type machine struct {
	when      time.Time
	command   string
	cpus      int
	cpuModel  string
	kernel    string
	loadStart string
	loadEnd   string
}

func describe() machine {
	m := machine{when: time.Now().UTC(), command: benchkit.Command(), cpus: runtime.NumCPU(), loadStart: benchkit.LoadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// row is one line of the figure table.
type row struct {
	fig, what, span, target string
}

func rows(o options) []row {
	t := timing(o)
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
		{figBaseline, "**baseline**: plain rsocket-go server", "SIGSTOP of a client (keepalive 200 ms) → the server's `OnClose` (no read-deadline cap; run in parallel with the trials above)", "(≈ 90 s expected)"},
	}
}

// fmtDur prints milliseconds below 10 s and seconds above.
func fmtDur(d time.Duration) string {
	if d >= 10*time.Second || d <= -10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func renderReport(m machine, o options, res *results) string {
	var b strings.Builder
	t := timing(o)
	fmt.Fprintf(&b, "command: `%s`\n\n", m.command)
	fmt.Fprintf(&b, "date: %s; machine: %d CPUs (%s), kernel %s, %s; load average %s at the start, %s at the end\n\n",
		m.when.Format(time.RFC3339), m.cpus, m.cpuModel, m.kernel, runtime.Version(), m.loadStart, m.loadEnd)
	fmt.Fprintf(&b, "cluster: %d `retryring coordinator` processes and %d `leaseprobe` processes on loopback, one ring; "+
		"lease TTL %v, renewal %v, silence timeout %v, Raft heartbeat/election %v/%v, leader lease %v, Raft log fsync on\n\n",
		o.coordinators, o.probes, t.TTL, t.Renewal, silenceTimeout(o), coordinator.DefaultHeartbeatTimeout,
		coordinator.DefaultElectionTimeout, coordinator.DefaultLeaderLeaseTimeout)
	backoff := leaseclient.Backoff{Min: leaseclient.DefaultBackoffMin, Max: leaseclient.DefaultBackoffMax}
	backoffSource := "the lease client's defaults"
	if o.probeBackoffMax > 0 {
		backoff.Max, backoffSource = o.probeBackoffMax, "Max set by -probe-backoff-max"
	}
	fmt.Fprintf(&b, "probes: worker/leaseclient, keepalive %v, reconnect backoff full jitter in [0, min(%v, %v×2^n)) (%s)\n\n",
		leaseclient.DefaultKeepalive, backoff.Max, backoff.Min, backoffSource)
	fmt.Fprintf(&b, "| figure | measured from → to | target | trials | median | p99 | min | max |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows(o) {
		if r.fig == figBaseline && len(res.lost) > 0 {
			// The failover's count goes with the other failover rows, before the baseline.
			lostRow(&b, o, res)
		}
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
			fmt.Fprintf(&b, "| %s | %s | %s | %s | — | — | — | — |\n", r.what, r.span, r.target, n)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.what, r.span, r.target, n,
			fmtDur(s.Median), fmtDur(s.P99), fmtDur(s.Min), fmtDur(s.Max))
	}
	fmt.Fprintf(&b, "\np99 is the nearest rank: with fewer than 100 trials it is the maximum. Median: the mean of the two middle values.\n")
	if len(res.notes) > 0 {
		fmt.Fprintf(&b, "\nnotes:\n")
		for _, n := range res.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nraw values (ms, sorted):\n")
	for _, r := range rows(o) {
		if vals := res.vals[r.fig]; len(vals) > 0 {
			s := append([]time.Duration(nil), vals...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			parts := make([]string, len(s))
			for i, v := range s {
				parts[i] = fmt.Sprintf("%.0f", float64(v)/float64(time.Millisecond))
			}
			fmt.Fprintf(&b, "- %s: %s\n", r.fig, strings.Join(parts, " "))
		}
	}
	if len(res.lost) > 0 {
		fmt.Fprintf(&b, "- %s (per trial): %v\n", figLeaderLost, res.lost)
	}
	return b.String()
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
