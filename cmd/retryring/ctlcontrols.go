package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// controlFlags are the flags every flow-control command takes besides the connection's.
type controlFlags struct {
	ring string
	conn *ctlConn
}

func (f *controlFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ring, "ring", "", "the ring, as REGION/CLUSTER/SERVICE (required)")
}

// parseRing reads --ring, REGION/CLUSTER/SERVICE.
func parseRing(s string) (lease.RingKey, error) {
	k, err := lease.ParseRing(s)
	if err != nil {
		return k, fmt.Errorf("--ring: %w", err)
	}
	return k, nil
}

// controlCommand builds a flow-control subcommand: the connection flags (ctlCommand), --ring,
// those its flags adds, and run, which makes the call.
func controlCommand(use, short, long string, flags func(fs *pflag.FlagSet), run func(cmd *cobra.Command, f *controlFlags) error) *cobra.Command {
	f := &controlFlags{}
	return ctlCommand(use, short, long, cobra.NoArgs,
		func(fs *pflag.FlagSet) {
			f.register(fs)
			flags(fs)
		},
		func(cmd *cobra.Command, c *ctlConn, _ []string) error {
			f.conn = c
			return run(cmd, f)
		})
}

func newPauseCommand() *cobra.Command {
	var req admin.PauseRequest
	return controlCommand("pause --ring REGION/CLUSTER/SERVICE [--impl TYPE ...] [--reason TEXT]",
		"Pause a ring: no traversal and no execution, or no execution of the given impl types",
		`Pause a ring. Without --impl its workers start no traversal and no execution; with --impl
they start no execution of those stacksaga impl types (added to those paused already). Rows stay
where they are, no attempt is used, calls in flight finish. A connected worker obeys within one
lease renewal. The ring need not exist yet. The pause is replicated: it survives a failover.`,
		func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&req.Impl, "impl", nil, "pause only executions of this stacksaga impl type (repeat for more)")
			fs.StringVar(&req.Reason, "reason", "", "why, for the people who look at the ring (kept from the last pause when not given)")
		},
		func(cmd *cobra.Command, f *controlFlags) error { return f.call(cmd, admin.ActionPause, req) })
}

func newResumeCommand() *cobra.Command {
	var req admin.ResumeRequest
	return controlCommand("resume --ring REGION/CLUSTER/SERVICE [--impl TYPE ...]",
		"End a ring's pauses: every one, or those of the given impl types", "",
		func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&req.Impl, "impl", nil, "resume only this impl type (repeat for more); a pause of the whole ring stays")
		},
		func(cmd *cobra.Command, f *controlFlags) error { return f.call(cmd, admin.ActionResume, req) })
}

func newLimitCommand() *cobra.Command {
	var perSecond float64
	var clear bool
	return controlCommand("limit --ring REGION/CLUSTER/SERVICE (--per-second N | --clear)",
		"Limit a ring's executions per second, or clear the limit",
		`Limit a ring's executions to N per second. The leader splits N among the ring's members in
proportion to the tokens assigned to them; each worker enforces its part. --clear removes the limit.`,
		func(fs *pflag.FlagSet) {
			fs.Float64Var(&perSecond, "per-second", 0, "executions per second for the whole ring, above 0")
			fs.BoolVar(&clear, "clear", false, "remove the ring's rate limit")
		},
		func(cmd *cobra.Command, f *controlFlags) error {
			// Changed misses a value from the environment: bindEnv sets the flag's value itself.
			set := cmd.Flags().Changed("per-second") || perSecond != 0
			switch {
			case set == clear:
				return errors.New("give either --per-second N or --clear")
			case clear:
				return f.call(cmd, admin.ActionLimit, admin.LimitRequest{Clear: true})
			case !(perSecond > 0) || math.IsInf(perSecond, 1):
				return fmt.Errorf("--per-second must be a number of executions per second above 0, got %v (to remove the limit: --clear)", perSecond)
			}
			return f.call(cmd, admin.ActionLimit, admin.LimitRequest{PerSecond: &perSecond})
		})
}

// call posts body to the ring's action on the coordinator and prints the controls it committed.
func (f *controlFlags) call(cmd *cobra.Command, action string, body any) error {
	ring, err := parseRing(f.ring)
	if err != nil {
		return err
	}
	path := admin.PathRings + url.PathEscape(ring.Region) + "/" + url.PathEscape(ring.Cluster) + "/" +
		url.PathEscape(ring.Service) + "/" + action
	answer, err := f.conn.post(cmd.Context(), path, body, ctlMutationTimeout)
	if err != nil {
		return err
	}
	return show(cmd, f.conn, answer, "the ring's controls", printControls)
}

func printControls(w io.Writer, a admin.ControlsAnswer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ring %s, committed by %s\n", a.Ring, a.LeaderID)
	fmt.Fprintln(tw, "PAUSED\tPAUSED IMPL\tRATE LIMIT\tREASON\tSINCE")
	p := formatControls(a.Controls)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.paused, p.impls, p.rate, p.reason, p.since)
	return tw.Flush()
}

// controlsLine is a ring's controls on one line of ctl ring.
func controlsLine(c admin.ControlsView) string {
	if !c.Paused && len(c.PausedImpl) == 0 && c.RatePerS == nil {
		return "controls: none"
	}
	p := formatControls(c)
	return fmt.Sprintf("controls: paused %s  paused impl %s  limit %s  reason %s  since %s", p.paused, p.impls, p.rate, p.reason, p.since)
}

// shownControls are a ring's controls as the CLI prints them, "-" for what is not set.
type shownControls struct{ paused, impls, rate, reason, since string }

func formatControls(c admin.ControlsView) shownControls {
	p := shownControls{paused: "no", impls: "-", rate: "none", reason: "-", since: "-"}
	if c.Paused {
		p.paused = "yes"
	}
	if len(c.PausedImpl) > 0 {
		p.impls = strings.Join(c.PausedImpl, ",")
	}
	if c.RatePerS != nil {
		p.rate = fmt.Sprintf("%g/s", *c.RatePerS)
	}
	if c.Reason != "" {
		p.reason = c.Reason
	}
	if c.SinceMs > 0 {
		p.since = time.UnixMilli(c.SinceMs).UTC().Format(time.RFC3339)
	}
	return p
}
