package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

func newCtlCommand() *cobra.Command {
	ctl := &cobra.Command{Use: "ctl", Short: "Operator commands against a coordinator's admin HTTP",
		Long: `Operator commands against a coordinator's admin HTTP. Every command takes --coordinator
(http:// or https:// address of any coordinator; HOST:PORT alone is https when --ca, --cert or
--key is given), --token-file (the admin token, sent as Authorization: Bearer; env
RETRYRING_ADMIN_TOKEN_FILE), --ca, --cert and --key (TLS), and -o table|json. A change sent to a
follower is forwarded by it to the leader.`}
	ring := ctlCommand("ring",
		"Print the rings as a table: coordinators, members, node indexes, ranges, leases, reports and backlog", "",
		cobra.NoArgs, nil,
		func(cmd *cobra.Command, c *ctlConn, _ []string) error {
			body, err := c.get(cmd.Context(), admin.PathRing)
			if err != nil {
				return err
			}
			return show(cmd, c, body, "a ring view", func(w io.Writer, v ringViewJSON) error { return printRing(w, v, time.Now()) })
		})
	ctl.AddCommand(ring, newStatusCommand(), newPeersCommand(), newStepDownCommand(),
		newCordonCommand(true), newCordonCommand(false), newAddPeerCommand(), newRemovePeerCommand(),
		newPauseCommand(), newResumeCommand(), newLimitCommand(), newMovementCommand())
	return ctl
}

// ringViewJSON mirrors GET /v1/ring (product.md "Admin HTTP") as the CLI reads it.
type ringViewJSON struct {
	CoordinatorID string `json:"coordinator_id"`
	LeaderID      string `json:"leader_id"`
	RaftTerm      uint64 `json:"raft_term"`
	Coordinators  []struct {
		ID          string `json:"id"`
		RaftAddr    string `json:"raft_addr"`
		RSocketAddr string `json:"rsocket_addr"`
		HTTPAddr    string `json:"http_addr"`
		State       string `json:"state"`
		Voter       bool   `json:"voter"`
	} `json:"coordinators"`
	Rings []struct {
		Region     string `json:"region"`
		Cluster    string `json:"cluster"`
		Service    string `json:"service"`
		Generation uint64 `json:"generation"`
		// Controls are the ring's flow controls (docs/protocol.md sections 7.2 and 7.4).
		Controls admin.ControlsView `json:"controls"`
		// Movement is the ring's movement mode (ctl movement).
		Movement admin.MovementView `json:"movement"`
		Members  []struct {
			WorkerID       string                        `json:"worker_id"`
			NodeIndex      int                           `json:"node_index"`
			Epoch          uint64                        `json:"epoch"`
			Ranges         []struct{ Start, End string } `json:"ranges"`
			LeaseExpiresMs int64                         `json:"lease_expires_ms"`
			State          string                        `json:"state"`
			Report         *memberReportJSON             `json:"report"`
			// Controls is false for a member that did not announce the controls feature; the
			// leader's view only.
			Controls *bool `json:"controls"`
			// Cordoned: ctl cordon; the member gets no range and is not Node-0.
			Cordoned bool `json:"cordoned"`
		} `json:"members"`
		Backlog *backlogJSON `json:"backlog"`
	} `json:"rings"`
}

// memberReportJSON is a member's "report" (docs/protocol.md section 7.3); only the leader's view has it.
type memberReportJSON struct {
	State          string             `json:"state"`
	AgeMs          *int64             `json:"age_ms"`
	ExecutionsPerS map[string]float64 `json:"executions_per_s"`
	PendingRows    int64              `json:"pending_rows"`
	Breakers       []breakerJSON      `json:"breakers"`
	LeaseFit       string             `json:"lease_fit"`
	// Clock is the worker's measured clock offset; absent from workers that predate it.
	Clock *lease.ClockReport `json:"clock"`
}

// backlogJSON is a ring's "backlog"; only the leader's view has it.
type backlogJSON struct {
	State              string             `json:"state"`
	AgeMs              *int64             `json:"age_ms"`
	PendingRows        int64              `json:"pending_rows"`
	ExecutionsPerS     map[string]float64 `json:"executions_per_s"`
	DeadLettersPerHour float64            `json:"dead_letters_per_hour"`
	OpenBreakers       []struct {
		WorkerID string `json:"worker_id"`
		breakerJSON
	} `json:"open_breakers"`
	ReportsUnknown []string `json:"reports_unknown"`
	LeaseUnfit     []string `json:"lease_unfit"`
}

type breakerJSON struct {
	Impl        string `json:"impl"`
	State       string `json:"state"`
	OpenUntilMs int64  `json:"open_until_ms"`
}

// outcomeOrder is the order of the outcomes the coordinator names (docs/protocol.md section 7.3).
var outcomeOrder = []string{"done", "transient", "permanent", "not_sent", "other"}

func printRing(w io.Writer, v ringViewJSON, now time.Time) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "coordinator %s, leader %s, raft term %d\n\n", v.CoordinatorID, v.LeaderID, v.RaftTerm)
	fmt.Fprintln(tw, "COORDINATOR\tSTATE\tVOTER\tRAFT\tRSOCKET\tHTTP")
	for _, c := range v.Coordinators {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", c.ID, c.State, c.Voter, c.RaftAddr, c.RSocketAddr, c.HTTPAddr)
	}
	for _, r := range v.Rings {
		fmt.Fprintf(tw, "\nring %s/%s/%s (generation %d)\n", r.Region, r.Cluster, r.Service, r.Generation)
		fmt.Fprintln(tw, controlsLine(r.Controls))
		fmt.Fprintln(tw, movementLine(r.Movement))
		members := make([]admin.MemberView, len(r.Members))
		for i, m := range r.Members {
			members[i] = admin.MemberView{WorkerID: m.WorkerID, NodeIndex: m.NodeIndex, State: m.State}
			for _, rg := range m.Ranges {
				members[i].Ranges = append(members[i].Ranges, lease.WireRange{Start: rg.Start, End: rg.End})
			}
		}
		fmt.Fprintln(tw, restLine(members))
		printBacklog(tw, r.Backlog)
		fmt.Fprintln(tw, "NODE\tWORKER\tSTATE\tEPOCH\tLEASE LEFT\tREPORT\tPENDING\tEXEC/S\tBREAKERS\tCLOCK\tSHARE\tRANGES")
		var untrusted []string
		for _, m := range r.Members {
			ranges := make([]string, len(m.Ranges))
			for i, rg := range m.Ranges {
				ranges[i] = "[" + rg.Start + ", " + rg.End + "]"
			}
			left := "-"
			if m.LeaseExpiresMs > 0 {
				left = time.UnixMilli(m.LeaseExpiresMs).Sub(now).Round(time.Millisecond).String()
			}
			node := fmt.Sprint(m.NodeIndex)
			if m.NodeIndex == 0 {
				node = "0 (Node-0)"
			}
			report, pending, execs, breakers, clock := "-", "-", "-", "-", "-"
			if rep := m.Report; rep != nil {
				if text, beyond := admin.ClockText(rep.Clock); text != "" {
					clock = text
					if beyond {
						untrusted = append(untrusted, m.WorkerID+" "+text)
					}
				}
				report = rep.State
				if rep.AgeMs != nil {
					report += " " + (time.Duration(*rep.AgeMs) * time.Millisecond).Round(100*time.Millisecond).String()
					pending, breakers = fmt.Sprint(rep.PendingRows), fmt.Sprint(len(rep.Breakers))
				}
				if rep.ExecutionsPerS != nil {
					total := 0.0
					for _, x := range rep.ExecutionsPerS {
						total += x
					}
					execs = fmt.Sprintf("%.2f", total)
				}
				if rep.LeaseFit != "" {
					report += " (lease does not fit)"
				}
			}
			worker := m.WorkerID
			if m.Controls != nil && !*m.Controls {
				// It cannot obey an impl pause or a limit, and gets no renewal while paused.
				worker += " (no controls)"
			}
			state := m.State
			if m.Cordoned && state != admin.MemberDeparted {
				state = "cordoned"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", node, worker, state, m.Epoch, left,
				report, pending, execs, breakers, clock, shareOf(m.Ranges), strings.Join(ranges, " "))
		}
		for _, u := range untrusted {
			// The worker leaves its ring until its clock is back within the bound.
			fmt.Fprintf(tw, "clock untrusted (beyond half of max_clock_offset from Cassandra; fix the host's time sync): %s\n", u)
		}
	}
	return tw.Flush()
}

// shareOf is a member's share of the ring and its number of ranges, "12.5% in 3" (the minimal
// movement mode holds a member to at most max ranges), "-" for none.
func shareOf(ranges []struct{ Start, End string }) string {
	if len(ranges) == 0 {
		return "-"
	}
	ws := make([]lease.WireRange, len(ranges))
	for i, r := range ranges {
		ws[i] = lease.WireRange{Start: r.Start, End: r.End}
	}
	rs, err := lease.DecodeRanges(ws)
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.1f%% in %d", 100*lease.Normalize(rs).Fraction(), len(ranges))
}

// printBacklog writes a ring's backlog line, and a line per breaker that is not closed.
func printBacklog(w io.Writer, b *backlogJSON) {
	if b == nil {
		fmt.Fprintln(w, "backlog: not on this coordinator (the leader keeps the reports; ask it)")
		return
	}
	age := "unknown"
	if b.AgeMs != nil {
		age = (time.Duration(*b.AgeMs) * time.Millisecond).Round(time.Second).String()
	}
	var execs []string
	for _, o := range outcomeOrder {
		if x, ok := b.ExecutionsPerS[o]; ok {
			execs = append(execs, fmt.Sprintf("%s=%.2f", o, x))
		}
	}
	fmt.Fprintf(w, "backlog age %s (%s)  pending %d  exec/s %s  breakers %d  dead letters/h %.1f  reports unknown %d\n",
		age, b.State, b.PendingRows, strings.Join(execs, " "), len(b.OpenBreakers), b.DeadLettersPerHour, len(b.ReportsUnknown))
	for _, br := range b.OpenBreakers {
		impl := br.Impl
		if impl == "" {
			impl = "(whole ring)"
		}
		line := fmt.Sprintf("breaker %s %s %s", br.WorkerID, impl, br.State)
		if br.OpenUntilMs > 0 {
			line += " until " + time.UnixMilli(br.OpenUntilMs).UTC().Format(time.TimeOnly) + " UTC"
		}
		fmt.Fprintln(w, line)
	}
	if len(b.ReportsUnknown) > 0 {
		fmt.Fprintf(w, "report unknown: %s\n", strings.Join(b.ReportsUnknown, ", "))
	}
	if len(b.LeaseUnfit) > 0 {
		fmt.Fprintf(w, "lease does not fit: %s\n", strings.Join(b.LeaseUnfit, ", "))
	}
}

// restLine says whether a ring is at rest as this view has it: every member listed is active, their
// ranges cover the ring with no gap and no overlap, and their node indexes are 0..N-1
// (admin.RingStateView.AtRest, with the listed members as the workers), or the first thing that
// is still on its way. A leader's view is the committed state; a follower's may lag it.
func restLine(members []admin.MemberView) string {
	if len(members) == 0 {
		return "at rest: no members"
	}
	workers := make(map[string]string, len(members))
	for _, m := range members {
		workers[m.WorkerID] = "" // the table's view carries no incarnations: any one
	}
	if err := (admin.RingStateView{Members: members}).AtRest(workers); err != nil {
		return "at rest: no, " + err.Error()
	}
	if len(members) == 1 {
		return "at rest: yes, 1 member holds the whole ring as Node-0"
	}
	return fmt.Sprintf("at rest: yes, %d members tile the ring with node indexes 0..%d", len(members), len(members)-1)
}
