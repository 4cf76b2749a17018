package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// newMovementCommand builds ctl movement RING MODE: the ring's movement mode, a replicated
// setting of the ring.
func newMovementCommand() *cobra.Command {
	var tolerance float64
	var maxRanges, stepMoves int
	var returnDelay, idle time.Duration
	return ctlCommand("movement RING MODE [--tolerance T] [--max-ranges K] [--return-delay D] [--idle D] [--step-moves M]",
		"Set a ring's movement mode: contiguous (the default) or minimal",
		`Set how a ring's tokens are assigned to its workers. contiguous, the default, splits the ring
into equal contiguous ranges in join order: a join or a leave moves up to half of the ring. minimal
moves little: a join takes about 1/(N+1) of the ring from the most loaded workers, a worker that
restarts within --return-delay gets its ranges back, a crashed worker's ranges go to the least
loaded once that delay has run out; shares stay within --tolerance of the mean right after a change
and a worker holds at most --max-ranges ranges. Once the ring has been settled for --idle, the
leader evens the shares out, at most --step-moves range moves per step and a step per --idle: the
even-out's churn budget. A parameter left out takes its default. RING is REGION/CLUSTER/SERVICE;
the ring need not exist yet. The setting and its parameters are replicated (every leader waits and
spends the same, through failovers) and need every coordinator on FSM version 6.`,
		cobra.ExactArgs(2),
		func(fs *pflag.FlagSet) {
			fs.Float64Var(&tolerance, "tolerance", 0, "minimal mode: how far a share may be from the mean right after a change, a fraction above 0 and at most 0.5 (default 0.1)")
			fs.IntVar(&maxRanges, "max-ranges", 0, "minimal mode: the most ranges a worker holds, at least ⌈1/tolerance⌉+2 (default 16)")
			fs.DurationVar(&returnDelay, "return-delay", 0, "minimal mode: how long a worker id that left keeps its ranges for its return, 1s to 10m (default 10s)")
			fs.DurationVar(&idle, "idle", 0, "minimal mode: how long the ring stays settled before an even-out step, and the steps' spacing, 1s to 1h (default 10s)")
			fs.IntVar(&stepMoves, "step-moves", 0, "minimal mode: the most range moves of one even-out step, 1 to 1024 (default 8)")
		},
		func(cmd *cobra.Command, c *ctlConn, args []string) error {
			ring, err := lease.ParseRing(args[0])
			if err != nil {
				return fmt.Errorf("RING: %w", err)
			}
			req := admin.MovementRequest{Mode: args[1]}
			tolGiven, maxGiven := flagGiven(cmd, "tolerance"), flagGiven(cmd, "max-ranges")
			delayGiven, idleGiven, stepGiven := flagGiven(cmd, "return-delay"), flagGiven(cmd, "idle"), flagGiven(cmd, "step-moves")
			switch {
			case req.Mode != fsm.ModeMinimal && req.Mode != fsm.ModeContiguous:
				return fmt.Errorf("MODE %q: want %s or %s", req.Mode, fsm.ModeMinimal, fsm.ModeContiguous)
			case req.Mode == fsm.ModeContiguous && (tolGiven || maxGiven || delayGiven || idleGiven || stepGiven):
				return fmt.Errorf("--tolerance, --max-ranges, --return-delay, --idle and --step-moves are parameters of the %s mode; %s takes none", fsm.ModeMinimal, fsm.ModeContiguous)
			case tolGiven && !(tolerance > 0 && tolerance <= 0.5):
				return fmt.Errorf("--tolerance must be above 0 and at most 0.5 (a fraction of the mean share), got %v", tolerance)
			case maxGiven && maxRanges < 1:
				return fmt.Errorf("--max-ranges must be at least 1, got %d", maxRanges)
			case delayGiven && (returnDelay < fsm.MinReturnDelay || returnDelay > fsm.MaxReturnDelay || returnDelay%time.Millisecond != 0):
				return fmt.Errorf("--return-delay must be from %v to %v in whole milliseconds, got %v", fsm.MinReturnDelay, fsm.MaxReturnDelay, returnDelay)
			case idleGiven && (idle < fsm.MinIdle || idle > fsm.MaxIdle || idle%time.Millisecond != 0):
				return fmt.Errorf("--idle must be from %v to %v in whole milliseconds, got %v", fsm.MinIdle, fsm.MaxIdle, idle)
			case stepGiven && (stepMoves < 1 || stepMoves > fsm.MaxStepMoves):
				return fmt.Errorf("--step-moves must be from 1 to %d, got %d", fsm.MaxStepMoves, stepMoves)
			}
			if tolGiven {
				req.Tolerance = &tolerance
			}
			if maxGiven {
				req.MaxRanges = &maxRanges
			}
			if delayGiven {
				ms := returnDelay.Milliseconds()
				req.ReturnDelayMs = &ms
			}
			if idleGiven {
				ms := idle.Milliseconds()
				req.IdleMs = &ms
			}
			if stepGiven {
				req.StepMoves = &stepMoves
			}
			path := admin.PathRings + url.PathEscape(ring.Region) + "/" + url.PathEscape(ring.Cluster) + "/" +
				url.PathEscape(ring.Service) + "/" + admin.ActionMovement
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
	if m.ReturnDelayMs > 0 { // 0: a coordinator of a build before the timing was a setting
		line += fmt.Sprintf("  return delay %v  even-out ≤%d moves per %v idle",
			time.Duration(m.ReturnDelayMs)*time.Millisecond, m.StepMoves, time.Duration(m.IdleMs)*time.Millisecond)
	}
	if len(m.Reserved) > 0 {
		line += "  reserved for a return: " + strings.Join(m.Reserved, ",")
	}
	if m.SinceMs > 0 {
		line += "  since " + time.UnixMilli(m.SinceMs).UTC().Format(time.RFC3339)
	}
	return line
}
