package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/retryring/retryring/internal/proc"
)

// commitIndexMetric is the leader's Raft commit index on /metrics: its growth over the steady
// phase is the Raft log's, every entry included (the leader's proofs of leadership too, which the
// replicated state never sees).
const commitIndexMetric = "retryring_coordinator_raft_commit_index"

// raftCommitIndex reads the coordinator's Raft commit index from its /metrics (plain HTTP only:
// a run with TLS reports no log growth).
func raftCommitIndex(ctx context.Context, c *proc.Coordinator) (uint64, error) {
	url := c.URL("/metrics")
	if strings.HasPrefix(url, "https:") {
		return 0, fmt.Errorf("%s: the admin port speaks TLS", url)
	}
	ctx, cancel := context.WithTimeout(ctx, viewTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), commitIndexMetric+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %s: %w", url, commitIndexMetric, err)
			}
			return uint64(f), nil
		}
	}
	return 0, fmt.Errorf("%s: no %s", url, commitIndexMetric)
}
