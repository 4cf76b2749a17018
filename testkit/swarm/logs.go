package swarm

import (
	"encoding/json"
	"io"
	"strings"
	"sync"

	"github.com/retryring/retryring/lease"
)

// The lease client's log messages the swarm counts. The client has no per-attempt hook, and its
// reconnect loop is not the swarm's to change, so these lines are the only place where a refused
// connection and a redirect's target show; TestLogCountsFollowTheLeaseClient fails if the client
// renames them.
const (
	msgSessionEnded = "lease stream ended, reconnecting"
	msgRedirect     = "following not_leader to the leader"
)

// logCounter is the clients' log writer: it counts the lines above by coordinator address and
// passes every line on to out, if set. zerolog writes one event per Write.
type logCounter struct {
	out io.Writer

	mu         sync.Mutex
	ended      map[string]uint64
	redirectTo map[string]uint64
	noLeader   uint64
}

func newLogCounter(out io.Writer) *logCounter {
	return &logCounter{out: out, ended: map[string]uint64{}, redirectTo: map[string]uint64{}}
}

type logLine struct {
	Message         string `json:"message"`
	CoordinatorAddr string `json:"coordinator_addr"`
	LeaderAddr      string `json:"leader_addr"`
	Error           string `json:"error"`
}

func (c *logCounter) Write(p []byte) (int, error) {
	var l logLine
	if err := json.Unmarshal(p, &l); err == nil {
		switch l.Message {
		case msgSessionEnded:
			c.mu.Lock()
			c.ended[l.CoordinatorAddr]++
			if strings.Contains(l.Error, lease.CodeNoLeader) {
				c.noLeader++
			}
			c.mu.Unlock()
		case msgRedirect:
			c.mu.Lock()
			c.redirectTo[l.LeaderAddr]++
			c.mu.Unlock()
		}
	}
	if c.out != nil {
		return c.out.Write(p)
	}
	return len(p), nil
}

func (c *logCounter) snapshot() (ended, redirectTo map[string]uint64, noLeader uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ended, redirectTo = make(map[string]uint64, len(c.ended)), make(map[string]uint64, len(c.redirectTo))
	for k, v := range c.ended {
		ended[k] = v
	}
	for k, v := range c.redirectTo {
		redirectTo[k] = v
	}
	return ended, redirectTo, c.noLeader
}
