package main

import (
	"fmt"
	"io"
	"net/url"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator/admin"
)

// newCordonCommand builds ctl cordon (set) or ctl uncordon.
func newCordonCommand(set bool) *cobra.Command {
	var ring string
	use, short, action := "cordon WORKER [--ring REGION/CLUSTER/SERVICE]", "Give a worker no range and not Node-0: it drains and stays connected", admin.ActionCordon
	long := `Cordon a worker: it stays a member, connected and reporting, but gets no range and is not
Node-0. Its ranges move to the other members by the safe path (once it released them or its lease
expired), so it drains without a gap and without two workers on one token. The cordon outlives a
restart of the worker (a new incarnation of the id); it ends with uncordon, or when no process of
the worker id is left in the ring. --ring is needed only when the worker id is in several rings.`
	if !set {
		use, short, action = "uncordon WORKER [--ring REGION/CLUSTER/SERVICE]", "Give a cordoned worker its share of the ring back", admin.ActionUncordon
		long = ""
	}
	return ctlCommand(use, short, long, cobra.ExactArgs(1),
		func(fs *pflag.FlagSet) {
			fs.StringVar(&ring, "ring", "", "the worker's ring, as REGION/CLUSTER/SERVICE (when the worker id is in several)")
		},
		func(cmd *cobra.Command, c *ctlConn, args []string) error {
			var req admin.CordonRequest
			if ring != "" {
				k, err := parseRing(ring)
				if err != nil {
					return err
				}
				req.Ring = &k
			}
			body, err := c.post(cmd.Context(), admin.PathWorkers+url.PathEscape(args[0])+"/"+action, req, ctlMutationTimeout)
			if err != nil {
				return err
			}
			return show(cmd, c, body, "a cordon answer", func(w io.Writer, a admin.CordonAnswer) error {
				state := "uncordoned: it gets its share back at the next plan"
				if a.Cordoned {
					state = "cordoned: it gets no range and drains"
				}
				_, err := fmt.Fprintf(w, "worker %s in ring %s %s (committed by %s)\n", a.WorkerID, a.Ring, state, a.LeaderID)
				return err
			})
		})
}
