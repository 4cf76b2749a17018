package main

import (
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
)

func newCtlCommand() *cobra.Command {
	ctl := &cobra.Command{Use: "ctl", Short: "Operator commands against a coordinator's admin HTTP"}
	var addr string
	var asJSON bool
	ring := &cobra.Command{
		Use:   "ring",
		Short: "Print the rings as a table: coordinators, members, node indexes, ranges and leases",
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := fetchRing(cmd.Context(), addr)
			if err != nil {
				return err
			}
			if asJSON {
				_, err := cmd.OutOrStdout().Write(body)
				return err
			}
			var view ringViewJSON
			if err := json.Unmarshal(body, &view); err != nil {
				return fmt.Errorf("coordinator at %s answered something that is not a ring view: %w", addr, err)
			}
			return printRing(cmd.OutOrStdout(), view)
		},
	}
	ring.Flags().StringVar(&addr, "coordinator", "http://127.0.0.1:7480", "admin HTTP address of any coordinator")
	ring.Flags().BoolVar(&asJSON, "json", false, "print the raw JSON view")
	annotateEnv(ring)
	ctl.AddCommand(ring)
	return ctl
}

func fetchRing(ctx context.Context, addr string) ([]byte, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+"/v1/ring", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("coordinator unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("coordinator answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
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
		Members    []struct {
			WorkerID       string                        `json:"worker_id"`
			NodeIndex      int                           `json:"node_index"`
			Epoch          uint64                        `json:"epoch"`
			Ranges         []struct{ Start, End string } `json:"ranges"`
			LeaseExpiresMs int64                         `json:"lease_expires_ms"`
			State          string                        `json:"state"`
		} `json:"members"`
	} `json:"rings"`
}

func printRing(w io.Writer, v ringViewJSON) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "coordinator %s, leader %s, raft term %d\n\n", v.CoordinatorID, v.LeaderID, v.RaftTerm)
	fmt.Fprintln(tw, "COORDINATOR\tSTATE\tVOTER\tRAFT\tRSOCKET\tHTTP")
	for _, c := range v.Coordinators {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", c.ID, c.State, c.Voter, c.RaftAddr, c.RSocketAddr, c.HTTPAddr)
	}
	for _, r := range v.Rings {
		fmt.Fprintf(tw, "\nring %s/%s/%s (generation %d)\n", r.Region, r.Cluster, r.Service, r.Generation)
		fmt.Fprintln(tw, "NODE\tWORKER\tSTATE\tEPOCH\tLEASE LEFT\tRANGES")
		for _, m := range r.Members {
			ranges := make([]string, len(m.Ranges))
			for i, rg := range m.Ranges {
				ranges[i] = "[" + rg.Start + ", " + rg.End + "]"
			}
			left := "-"
			if m.LeaseExpiresMs > 0 {
				left = time.Until(time.UnixMilli(m.LeaseExpiresMs)).Round(time.Millisecond).String()
			}
			node := fmt.Sprint(m.NodeIndex)
			if m.NodeIndex == 0 {
				node = "0 (Node-0)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", node, m.WorkerID, m.State, m.Epoch, left, strings.Join(ranges, " "))
		}
	}
	return tw.Flush()
}
