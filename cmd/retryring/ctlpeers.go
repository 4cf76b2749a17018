package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/coordinator/admin"
)

// peerTimeout bounds add-peer and remove-peer: a follower forwards the call, the leader
// replicates the configuration change to a quorum (up to 10 s) and answers.
const peerTimeout = 20 * time.Second

// newAddPeerCommand is ctl add-peer ID RAFTADDR.
func newAddPeerCommand() *cobra.Command {
	var replace bool
	return peerCommand("add-peer ID RAFTADDR", "Add a coordinator to the Raft configuration as a voter",
		`Add a voter: the node ID, reachable by the others at RAFTADDR (host:port). Start the node with
--join (never --peers): it catches up from the leader and registers itself. A node started with
--join also asks to be added on its own; add-peer is for an operator who adds it first. Adding a
voter that is already one at that address changes nothing. A voter of that ID at another
address is not moved (that would evict it): remove it first, or give --replace.`,
		cobra.ExactArgs(2), admin.PathAddPeer,
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&replace, "replace", false, "replace the voter of this ID wherever it is (remove it and its registration, then add ID at RAFTADDR): the old node must be gone for good")
		},
		func(args []string) admin.PeerRequest {
			return admin.PeerRequest{ID: args[0], RaftAddr: args[1], Replace: replace}
		})
}

// newRemovePeerCommand is ctl remove-peer ID.
func newRemovePeerCommand() *cobra.Command {
	return peerCommand("remove-peer ID", "Remove a coordinator from the Raft configuration and forget its registration",
		`Remove the voter ID (a dead node to replace, or one to retire; stop it first) and its
registered addresses. The cluster's quorum shrinks with it: remove one node at a time, and add
its replacement (--join) before removing the next. Removing a node that is not there changes
nothing; the last voter cannot be removed.`,
		cobra.ExactArgs(1), admin.PathRemovePeer, nil,
		func(args []string) admin.PeerRequest { return admin.PeerRequest{ID: args[0]} })
}

func peerCommand(use, short, long string, args cobra.PositionalArgs, path string, flags func(*pflag.FlagSet),
	request func([]string) admin.PeerRequest) *cobra.Command {
	return ctlCommand(use, short, long, args, flags, func(cmd *cobra.Command, c *ctlConn, args []string) error {
		answer, err := c.post(cmd.Context(), path, request(args), peerTimeout)
		if err != nil {
			return err
		}
		return show(cmd, c, answer, "a raft configuration", printPeerChange)
	})
}

func printPeerChange(w io.Writer, a admin.PeerChangeAnswer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "raft configuration, as leader %s has it\n", a.LeaderID)
	fmt.Fprintln(tw, "ID\tRAFT\tVOTER")
	for _, s := range a.Servers {
		fmt.Fprintf(tw, "%s\t%s\t%v\n", s.ID, s.RaftAddr, s.Voter)
	}
	return tw.Flush()
}
