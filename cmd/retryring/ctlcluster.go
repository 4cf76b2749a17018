package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator/admin"
)

func newStatusCommand() *cobra.Command {
	return ctlCommand("status", "Print the coordinator asked and the leader: Raft state, term, indexes, FSM version, rings, readiness",
		`Print the coordinator asked and the leader as each describes itself: Raft state, term, leader,
last contact with the leader, last log, commit and applied index, FSM version, rings, members and
cordoned workers in its replicated state, and whether it is ready (GET /readyz) and why not.`,
		cobra.NoArgs, nil,
		func(cmd *cobra.Command, c *ctlConn, _ []string) error {
			body, err := c.get(cmd.Context(), admin.PathStatus)
			if err != nil {
				return err
			}
			return show(cmd, c, body, "a status", printStatus)
		})
}

func printStatus(w io.Writer, s admin.StatusAnswer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tNODE\tSTATE\tTERM\tLEADER\tLAST CONTACT\tLAST LOG\tCOMMIT\tAPPLIED\tFSM\tRINGS\tMEMBERS\tCORDONED\tREADY")
	row := func(label string, n admin.NodeStatus) {
		ready := "yes"
		if !n.Ready {
			ready = "no: " + n.Reason
		}

		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", label, n.ID, n.State, n.Term, dash(n.LeaderID),
			dash(n.LastContact), n.LastLogIndex, n.CommitIndex, n.AppliedIndex, n.FSMVersion, n.Rings, n.Members, n.Cordoned, ready)
	}
	row("asked", s.Node)
	switch {
	case s.Leader != nil && s.Leader.ID == s.Node.ID:
	case s.Leader != nil:
		row("leader", *s.Leader)
	default:
		fmt.Fprintf(tw, "leader\t%s\n", s.LeaderError)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l := s.Leader; l != nil && l.Settling {
		_, err := fmt.Fprintf(w, "note: leader %s is settling a new or recovered state: it assigns nothing until every lease from before may have run out (about one lease TTL)\n", l.ID)
		return err
	}
	return nil
}

func newPeersCommand() *cobra.Command {
	return ctlCommand("peers", "Print every coordinator of the Raft configuration: addresses, state, voter, last contact, indexes",
		`Print every server of the Raft configuration: its id, Raft, RSocket and admin addresses, Raft
state, voter or not, last contact with the leader, commit and applied index, as each describes
itself to the coordinator asked (a server that does not answer is shown unreachable).`,
		cobra.NoArgs, nil,
		func(cmd *cobra.Command, c *ctlConn, _ []string) error {
			body, err := c.get(cmd.Context(), admin.PathPeers)
			if err != nil {
				return err
			}
			return show(cmd, c, body, "a list of peers", printPeers)
		})
}

func printPeers(w io.Writer, p admin.PeersAnswer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "asked %s, leader %s\n\n", p.CoordinatorID, dash(p.LeaderID))
	fmt.Fprintln(tw, "ID\tSTATE\tVOTER\tLAST CONTACT\tCOMMIT\tAPPLIED\tFSM\tRAFT\tRSOCKET\tHTTP")
	var reasons []string
	for _, peer := range p.Peers {
		if peer.Status == nil {
			state := peer.Problem
			if state == "" { // a coordinator of an older release says it in Error only
				state = admin.PeerUnreachable
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t-\t-\t-\t-\t%s\t-\t-\n", peer.ID, state, peer.Voter, peer.RaftAddr)
			reasons = append(reasons, peer.ID+": "+peer.Error)
			continue
		}
		s := peer.Status
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", peer.ID, s.State, peer.Voter, dash(s.LastContact),
			s.CommitIndex, s.AppliedIndex, s.FSMVersion, peer.RaftAddr, dash(s.RSocketAddr), dash(s.HTTPAddr))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(reasons) > 0 {
		_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(reasons, "\n"))
		return err
	}
	return nil
}

func newStepDownCommand() *cobra.Command {
	var req admin.StepDownRequest
	return ctlCommand("step-down [--to ID]", "Hand the Raft leadership over, to --to or to the voter Raft picks",
		`Hand the leadership over (Raft leadership transfer). Sent to any coordinator: a follower
forwards it to the leader. The new leader renews every lease at once; no worker loses a range.
Before a planned restart of the leader, this makes the handover a matter of milliseconds instead
of an election timeout.`,
		cobra.NoArgs,
		func(fs *pflag.FlagSet) {
			fs.StringVar(&req.To, "to", "", "the voter to hand the lead to (default: the one Raft finds most up to date)")
		},
		func(cmd *cobra.Command, c *ctlConn, _ []string) error {
			body, err := c.post(cmd.Context(), admin.PathStepDown, req, ctlStepDownTimeout)
			if err != nil {
				return err
			}
			return show(cmd, c, body, "a step-down answer", func(w io.Writer, a admin.StepDownAnswer) error {
				if a.LeaderID == "" {
					_, err := fmt.Fprintf(w, "%s stepped down; no new leader seen yet (term %d): see ctl status\n", a.PreviousLeader, a.Term)
					return err
				}
				_, err := fmt.Fprintf(w, "leadership handed from %s to %s in %d ms (term %d)\n", a.PreviousLeader, a.LeaderID, a.TookMs, a.Term)
				return err
			})
		})
}

// dash shows an empty string as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
