package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	rslogger "github.com/rsocket/rsocket-go/logger"

	"github.com/retryring/retryring/lease"
)

func TestMain(m *testing.M) {
	// rsocket-go logs every refused frame at error level on its global logger: quiet in tests.
	if os.Getenv("RETRYRING_TEST_RSOCKET_LOG") == "" {
		rslogger.SetLevel(rslogger.LevelError + 1)
	}
	os.Exit(m.Run())
}

// testTiming is a short lease timing so that expiries happen within the test budget.
var testTiming = lease.Timing{TTL: 1500 * time.Millisecond, Renewal: 300 * time.Millisecond, Margin: 100 * time.Millisecond}

// testLogger writes to t.Log until the test ends (goroutines may outlive a test by a moment).
// RETRYRING_TEST_LOG=debug|info|warn picks the level; the default is warn.
func testLogger(t testing.TB) zerolog.Logger {
	level := zerolog.WarnLevel
	if l, err := zerolog.ParseLevel(os.Getenv("RETRYRING_TEST_LOG")); err == nil && l != zerolog.NoLevel {
		level = l
	}
	w := &testLogWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs after every later cleanup
	return zerolog.New(zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}).
		Level(level).With().Timestamp().Logger()
}

type testLogWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// testCluster is N coordinators on loopback with pre-bound listeners.
type testCluster struct {
	t     testing.TB
	nodes []*Node
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newCluster(t testing.TB, size int, mutate func(i int, c *Config)) *testCluster {
	t.Helper()
	log := testLogger(t)
	raftLns := make([]net.Listener, size)
	peers := make([]Peer, size)
	for i := range raftLns {
		raftLns[i] = listenLoopback(t)
		peers[i] = Peer{ID: fmt.Sprintf("c%d", i+1), RaftAddr: raftLns[i].Addr().String()}
	}
	tc := &testCluster{t: t}
	for i := range size {
		cfg := Config{
			NodeID:          peers[i].ID,
			DataDir:         t.TempDir(),
			Peers:           peers,
			Timing:          testTiming,
			NoSync:          true,
			Logger:          log,
			RaftListener:    raftLns[i],
			RSocketListener: listenLoopback(t),
			HTTPListener:    listenLoopback(t),
			// The harness's clusters start on loopback ports no earlier cluster used, so no worker
			// can hold a lease from before their bootstrap: they skip the settling wait (settle.go)
			// unless a test of that wait turns it back on.
			trustFreshState: true,
		}
		if mutate != nil {
			mutate(i, &cfg)
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tc.nodes = append(tc.nodes, n)
	}
	for _, n := range tc.nodes {
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Kill)
	}
	return tc
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leader waits for a leader that is ready to serve (its term passed the barrier) and that every
// other live node knows, with every live node registered.
func (c *testCluster) leader() *Node {
	c.t.Helper()
	var leader *Node
	eventually(c.t, 15*time.Second, "a ready leader known to all", func() bool {
		leader = nil
		live := 0
		for _, n := range c.nodes {
			if n.isClosed() {
				continue
			}
			live++
			if n.IsLeader() {
				if t := n.currentTerm(); t != nil && t.isReady() {
					leader = n
				}
			}
		}
		if leader == nil {
			return false
		}
		v := leader.View()
		registered := 0
		for _, cv := range v.Coordinators {
			if cv.RSocketAddr != "" {
				registered++
			}
		}
		if registered < live {
			return false
		}
		for _, n := range c.nodes {
			if n.isClosed() {
				continue
			}
			if id, addr := n.Leader(); id != leader.cfg.NodeID || addr != leader.RSocketAddr() {
				return false
			}
		}
		return true
	})
	return leader
}

func (c *testCluster) followers(leader *Node) []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n != leader && !n.isClosed() {
			out = append(out, n)
		}
	}
	return out
}

func (c *testCluster) rsocketAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.RSocketAddr())
	}
	return out
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// getJSON fetches an admin path and decodes the answer.
func getJSON(t testing.TB, addr, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s%s: decode: %v", addr, path, err)
		}
	}
	return resp.StatusCode
}
