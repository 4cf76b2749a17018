package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/lease"
)

// peerTimeout bounds add-peer and remove-peer: a follower forwards the call, the leader
// replicates the configuration change to a quorum (up to 10 s) and answers.
const peerTimeout = 20 * time.Second

// newAddPeerCommand is ctl add-peer ID RAFTADDR.
func newAddPeerCommand() *cobra.Command {
	return peerCommand("add-peer ID RAFTADDR", "Add a coordinator to the Raft configuration as a voter",
		`Add a voter: the node ID, reachable by the others at RAFTADDR (host:port). Start the node with
--join (never --peers): it catches up from the leader and registers itself. A node started with
--join also asks to be added on its own; add-peer is for an operator who adds it first. Adding a
voter that is already one at that address changes nothing.`,
		cobra.ExactArgs(2), coordinator.PathAddPeer,
		func(args []string) coordinator.PeerRequest {
			return coordinator.PeerRequest{ID: args[0], RaftAddr: args[1]}
		})
}

// newRemovePeerCommand is ctl remove-peer ID.
func newRemovePeerCommand() *cobra.Command {
	return peerCommand("remove-peer ID", "Remove a coordinator from the Raft configuration and forget its registration",
		`Remove the voter ID (a dead node to replace, or one to retire; stop it first) and its
registered addresses. The cluster's quorum shrinks with it: remove one node at a time, and add
its replacement (--join) before removing the next. Removing a node that is not there changes
nothing; the last voter cannot be removed.`,
		cobra.ExactArgs(1), coordinator.PathRemovePeer,
		func(args []string) coordinator.PeerRequest { return coordinator.PeerRequest{ID: args[0]} })
}

func peerCommand(use, short, long string, args cobra.PositionalArgs, path string, request func([]string) coordinator.PeerRequest) *cobra.Command {
	var addr, output string
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: args,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd, os.LookupEnv); err != nil {
				return err
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			answer, err := postPeer(cmd.Context(), addr, path, request(args))
			if err != nil {
				return err
			}
			if output == "json" {
				_, err := cmd.OutOrStdout().Write(answer)
				return err
			}
			var got coordinator.PeerChangeAnswer
			if err := json.Unmarshal(answer, &got); err != nil {
				return fmt.Errorf("coordinator at %s answered something that is not a raft configuration: %w", addr, err)
			}
			return printPeerChange(cmd.OutOrStdout(), got)
		},
	}
	cmd.Flags().StringVar(&addr, "coordinator", "http://127.0.0.1:7480", "admin HTTP address of any coordinator (a follower forwards the call to the leader)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output: table or json")
	annotateEnv(cmd)
	return cmd
}

// postPeer posts a peer change and returns the leader's answer, or one line naming what is wrong.
func postPeer(ctx context.Context, addr, path string, req coordinator.PeerRequest) ([]byte, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(addr, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("--coordinator %q: %w", addr, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("coordinator unreachable: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var we lease.WireError
		if json.Unmarshal(answer, &we) == nil && we.Code != "" {
			return nil, fmt.Errorf("coordinator answered %s: %s: %s", resp.Status, we.Code, we.Message)
		}
		return nil, fmt.Errorf("coordinator answered %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	return answer, nil
}

func printPeerChange(w io.Writer, a coordinator.PeerChangeAnswer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "raft configuration, as leader %s has it\n", a.LeaderID)
	fmt.Fprintln(tw, "ID\tRAFT\tVOTER")
	for _, s := range a.Servers {
		fmt.Fprintf(tw, "%s\t%s\t%v\n", s.ID, s.RaftAddr, s.Voter)
	}
	return tw.Flush()
}
