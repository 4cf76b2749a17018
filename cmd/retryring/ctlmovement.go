package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// newMovementCommand builds ctl movement RING MODE: the ring's movement mode, a replicated
// setting of the ring.
func newMovementCommand() *cobra.Command {
	var tolerance float64
	var maxRanges int
	return ctlCommand("movement RING MODE [--tolerance T] [--max-ranges K]",
		"Set a ring's movement mode: contiguous (the default) or minimal",
		`Set how a ring's tokens are assigned to its workers. contiguous, the default, splits the ring
into equal contiguous ranges in join order: a join or a leave moves up to half of the ring. minimal
moves little: a join takes about 1/(N+1) of the ring from the most loaded workers, a worker that
restarts gets its ranges back, a crashed worker's ranges go to the least loaded once the leader's
return delay (10 s) has run out; shares stay within --tolerance of the mean and a worker holds at
most --max-ranges ranges. RING is REGION/CLUSTER/SERVICE; the ring need not exist yet. The setting
is replicated (it survives a failover) and needs every coordinator on FSM version 6.`,
		cobra.ExactArgs(2),
		func(fs *pflag.FlagSet) {
			fs.Float64Var(&tolerance, "tolerance", 0, "minimal mode: how far a share may be from the mean right after a change, a fraction above 0 and at most 0.5 (default 0.1)")
			fs.IntVar(&maxRanges, "max-ranges", 0, "minimal mode: the most ranges a worker holds, at least ⌈1/tolerance⌉+2 (default 16)")
		},
		func(cmd *cobra.Command, c *ctlConn, args []string) error {
			ring, err := lease.ParseRing(args[0])
			if err != nil {
				return fmt.Errorf("RING: %w", err)
			}
			req := admin.MovementRequest{Mode: args[1]}
			tolGiven, maxGiven := flagGiven(cmd, "tolerance"), flagGiven(cmd, "max-ranges")
			switch {
			case req.Mode != fsm.ModeMinimal && req.Mode != fsm.ModeContiguous:
				return fmt.Errorf("MODE %q: want %s or %s", req.Mode, fsm.ModeMinimal, fsm.ModeContiguous)
			case req.Mode == fsm.ModeContiguous && (tolGiven || maxGiven):
				return fmt.Errorf("--tolerance and --max-ranges are parameters of the %s mode; %s takes none", fsm.ModeMinimal, fsm.ModeContiguous)
			case tolGiven && !(tolerance > 0 && tolerance <= 0.5):
				return fmt.Errorf("--tolerance must be above 0 and at most 0.5 (a fraction of the mean share), got %v", tolerance)
			case maxGiven && maxRanges < 1:
				return fmt.Errorf("--max-ranges must be at least 1, got %d", maxRanges)
			}
			if tolGiven {
				req.Tolerance = &tolerance
			}
			if maxGiven {
				req.MaxRanges = &maxRanges
			}
			path := coordinator.PathRings + url.PathEscape(ring.Region) + "/" + url.PathEscape(ring.Cluster) + "/" +
				url.PathEscape(ring.Service) + "/" + coordinator.ActionMovement
			answer, err := c.post(cmd.Context(), path, req, ctlMutationTimeout)
			if err != nil {
				return err
			}
			return show(cmd, c, answer, "a movement answer", func(w io.Writer, a admin.MovementAnswer) error {
				_, err := fmt.Fprintf(w, "ring %s %s (committed by %s)\n", a.Ring, movementLine(a.Movement), a.LeaderID)
				return err
			})
		})
}

// movementLine is a ring's movement mode on one line.
func movementLine(m admin.MovementView) string {
	if m.Mode != fsm.ModeMinimal {
		return "movement: contiguous"
	}
	line := fmt.Sprintf("movement: minimal  tolerance %g  max ranges %d", m.Tolerance, m.MaxRanges)
	if len(m.Reserved) > 0 {
		line += "  reserved for a return: " + strings.Join(m.Reserved, ",")
	}
	if m.SinceMs > 0 {
		line += "  since " + time.UnixMilli(m.SinceMs).UTC().Format(time.RFC3339)
	}
	return line
}
