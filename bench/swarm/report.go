package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/swarm"
	"github.com/retryring/retryring/worker/leaseclient"
)

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// render is the markdown report: a header, one column per (size, timing), the notes.
func render(m benchkit.Run, o options, rs []*result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "command:  `%s`\n", m.Command)
	fmt.Fprintf(&b, "date:     %s\n", m.When.Format(time.RFC3339))
	fmt.Fprintf(&b, "machine:  %d CPUs (%s), kernel %s, %s\n", m.CPUs, m.CPUModel, m.Kernel, runtime.Version())
	fmt.Fprintf(&b, "load avg: %s at the start, %s at the end\n", m.LoadAvgFrom, m.LoadEnd)
	fmt.Fprintf(&b, "binary:   %s (%s)\n", o.binary, oneLine(o.binaryVersion))
	fmt.Fprintf(&b, "files:    %s\n", o.files)
	fmt.Fprintf(&b, "per column: 3 `retryring coordinator` processes on loopback, N lease clients (worker/leaseclient) in this process, one RSocket connection each, worker i in ring i mod N/10; the join storm starts once the fresh cluster's first-assignment wait (its holder bound) is over; steady %v, then kill -9 of the leader, then a rolling restart by SIGTERM (c3, c2, c1); the clients' KEEPALIVE period %v, an answer asked on one in %d\n\n", o.steady, keepaliveOf(o), answerEveryOf(o))

	head := []string{""}
	for _, r := range rs {
		head = append(head, fmt.Sprintf("%d workers, %d rings, %s timing (TTL %v / renewal %v)", r.workers, r.rings, r.timing.name, r.timing.ttl, r.timing.renewal))
	}
	line := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	line(head...)
	line(strings.Split(strings.Repeat("---,", len(head)), ",")[:len(head)]...)
	row := func(name string, cell func(r *result) string) {
		cells := []string{name}
		for _, r := range rs {
			cells = append(cells, cell(r))
		}
		line(cells...)
	}
	kill := func(cell func(f *faultResult) string) func(r *result) string {
		return func(r *result) string {
			if r.kill == nil {
				return "—"
			}
			return cell(r.kill)
		}
	}
	row("join storm: every ring settled after", func(r *result) string {
		if r.joinSettled == 0 {
			return fmt.Sprintf("not settled (%d of %d rings)", r.joinRings, r.rings)
		}
		return fmt.Sprintf("%s (leader CPU %.0f %%, RSS peak %.0f MB)", secs(r.joinSettled), r.joinUsage.CPUPercent, r.joinUsage.PeakRSSMiB)
	})
	row("steady: leader CPU / RSS", func(r *result) string { return r.steadyUsage.String() })
	row("steady: leader read(2) / write(2) calls per second", func(r *result) string {
		if r.steadyReadsPerSec < 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f / %.0f", r.steadyReadsPerSec, r.steadyWritesPerSec)
	})
	row("steady: lease age at receipt p50 / p99", func(r *result) string {
		if r.steadyElement == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s (%d elements)", secs(r.agesP50), secs(r.agesP99), r.steadyElement)
	})
	row("steady: Raft log growth (leader's commit index)", func(r *result) string {
		if r.steadyEntriesPerMin < 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f entries/min", r.steadyEntriesPerMin)
	})
	row("leader kill: new leader known after", kill(func(f *faultResult) string { return secs(f.electedIn) }))
	row("**leases that ran out before the new leader's first element**", kill(func(f *faultResult) string {
		return fmt.Sprintf("**%d of %d** (%d with a lapse after the kill, longest %s)", f.report.RanOut, f.report.Members, f.report.Lapsed, secs(f.report.LongestLapse))
	}))
	row("every worker renewed again after", kill(renewed))
	row("rings whose membership changed / workers with a new assignment", kill(func(f *faultResult) string {
		return fmt.Sprintf("%d / %d (leases: %d / %d)", f.ringsChanged, f.membersReassigned, f.report.RingsChanged, f.report.NewAssignment)
	}))
	row("overlaps (two workers on one token at once)", kill(func(f *faultResult) string { return fmt.Sprint(len(f.report.Overlaps)) }))
	row("sessions ended at the dead node / redirects to it / no_leader answers", kill(func(f *faultResult) string {
		return fmt.Sprintf("%d / %d / %d", f.counters.SessionsEnded[f.faultedAddr], f.counters.RedirectsTo[f.faultedAddr], f.counters.NoLeader)
	}))
	row("reconnects (all, redirects included)", kill(func(f *faultResult) string { return fmt.Sprint(f.counters.Reconnects) }))
	for i := 0; i < 3; i++ {
		row(fmt.Sprintf("rolling restart step %d: leases lost (longest lapse), new assignments", i+1), func(r *result) string {
			if i >= len(r.rolling) {
				return "—"
			}
			f := r.rolling[i]
			role := "follower"
			if f.wasLeader {
				role = "leader"
			}
			return fmt.Sprintf("%s (%s): %d (%s), %d", f.coordinator, role, f.report.Lapsed, secs(f.report.LongestLapse), f.membersReassigned)
		})
	}
	row("overlaps over the whole run", func(r *result) string {
		n := -1
		for _, f := range append([]*faultResult{r.kill}, r.rolling...) {
			if f != nil {
				n = len(f.report.Overlaps) // each report checks the whole history up to its end
			}
		}
		if n < 0 {
			return "—"
		}
		return fmt.Sprint(n)
	})
	var notes []string
	for _, r := range rs {
		for _, n := range r.notes {
			notes = append(notes, fmt.Sprintf("%d workers, %s timing: %s", r.workers, r.timing.name, n))
		}
		for _, f := range append([]*faultResult{r.kill}, r.rolling...) {
			if f == nil {
				continue
			}
			for i, ov := range f.report.Overlaps {
				if i == 3 {
					break
				}
				notes = append(notes, fmt.Sprintf("%d workers, %s timing, fault of %s: overlap %v", r.workers, r.timing.name, f.coordinator, ov))
			}
		}
	}
	sort.Strings(notes)
	if len(notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	b.WriteString(`
"ran out": a worker's lease (and anything the faulted node still sent it) ended before its first element from
another coordinator. "lapse": a span with no usable lease after the fault. Membership changes and new
assignments are read from the leader's committed state before the fault and after the rings settled again
(and, in brackets, from the generations and epochs of the leases the workers received). The new leader is
watched at least its reconnect grace + silence timeout + the holder bound after its election before that.
Sessions ended and redirects are counted from the lease client's log lines, by coordinator address.
`)
	return b.String()
}

func renewed(f *faultResult) string {
	r := f.report
	s := fmt.Sprintf("%s (p50 %s)", secs(swarm.Percentile(r.Renewed, 1)), secs(swarm.Percentile(r.Renewed, 0.5)))
	if r.NotRenewed > 0 {
		s += fmt.Sprintf(", %d never", r.NotRenewed)
	}
	return s
}

func oneLine(s string) string {
	if s == "" {
		return "version unknown"
	}
	return strings.Join(strings.Fields(s), " ")
}

// answerEveryOf is how many of the clients' KEEPALIVEs there are to one that asks for an answer.
func answerEveryOf(o options) int {
	if o.answerEvery == 0 {
		return leaseclient.DefaultKeepaliveAnswerEvery
	}
	return o.answerEvery
}

// keepaliveOf is the clients' KEEPALIVE period in force.
func keepaliveOf(o options) time.Duration {
	if o.keepalive == 0 {
		return leaseclient.DefaultKeepalive
	}
	return o.keepalive
}
