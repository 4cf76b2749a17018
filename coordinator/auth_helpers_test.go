package coordinator

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker/leaseclient"
)

// Tokens of the auth tests: long enough for CheckToken, one per role.
const (
	tokOrders    = "orders-token-0000000000000001"
	tokOrdersNew = "orders-token-0000000000000002"
	tokOther     = "other-ring-token-000000000001"
	tokAdmin     = "admin-token-00000000000000001"
	clusterSec   = "cluster-secret-000000000000001"
)

var otherRing = lease.RingKey{Region: "eu", Cluster: "c1", Service: "payments"}

// tokenLine is the tokens-file line of token for ring (the zero ring: an admin token).
func tokenLine(ring lease.RingKey, token string) string {
	if ring == (lease.RingKey{}) {
		return auth.EntryLine("", token, "") + "\n"
	}
	return auth.EntryLine(ring.String(), token, token[:6]) + "\n"
}

// authDir is a directory of auth files for one test.
func authDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/tmp", "rr-auth-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// realWorker is a worker/leaseclient Client run for a test: the real client a worker runs.
type realWorker struct {
	c        *leaseclient.Client
	elements atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	lastErr string // of the client's logs at warn or above
}

func startRealWorker(t testing.TB, id string, ring lease.RingKey, token string, addrs []string) *realWorker {
	t.Helper()
	w := &realWorker{done: make(chan struct{})}
	c, err := leaseclient.New(leaseclient.Config{
		WorkerID: id, Ring: ring, Token: token, Coordinators: addrs, Logger: testLogger(t),
		Backoff:   leaseclient.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Holding: 50 * time.Millisecond},
		OnElement: func(leaseclient.Element) { w.elements.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *realWorker) stop() {
	w.cancel()
	<-w.done
}

// holds reports whether the worker holds a lease that is still valid on its clock.
func (w *realWorker) holds() bool {
	_, err := w.c.Guard().Check(0)
	return err == nil
}

// appliedState is what a client must not change: the index of the last command the leader's state
// applied (not Raft's applied index, which also counts the barriers that prove the leader's
// leadership and change nothing) and the rings' members (worker, incarnation, epoch, state) as JSON.
func appliedState(n *Node) (uint64, string) {
	var applied uint64
	n.fsm.View(func(_ *fsm.State, i uint64) { applied = i })
	v := n.View()
	type m struct{ Ring, Worker, State string }
	var ms []m
	for _, r := range v.Rings {
		for _, x := range r.Members {
			ms = append(ms, m{r.Region + "/" + r.Cluster + "/" + r.Service, x.WorkerID, x.State})
		}
	}
	b, _ := json.Marshal(struct {
		M []m
		C []admin.NodeView
	}{ms, v.Coordinators})
	return applied, string(b)
}

// refusals reads the node's refusal counter of reason r.
func refusals(n *Node, r refusal) uint64 { return n.metrics.refusals[r].Load() }

// rawSetup sends a SETUP for worker id on ring with token (empty: none) and a lease stream
// request, and returns the connection.
func rawSetup(t testing.TB, addr, id string, ring lease.RingKey, token string) *rawConn {
	t.Helper()
	data, _ := json.Marshal(lease.Setup{WorkerID: id, Incarnation: id + "-attacker", Region: ring.Region,
		Cluster: ring.Cluster, Service: ring.Service, Token: token})
	c := dialRaw(t, addr)
	c.send(setupFrame(data, lease.DataMIME, lease.MetadataMIME), requestStreamFrame(1, lease.RouteLeases, []byte(`{}`)))
	return c
}

// expectRejected reads the REJECTED_SETUP of a refused SETUP and checks its code.
func expectRejected(t testing.TB, c *rawConn, code string) *lease.WireError {
	t.Helper()
	we := c.wireErrorFrame(core.ErrorCodeRejectedSetup)
	if we.Code != code {
		t.Fatalf("REJECTED_SETUP %q (%s), want %q", we.Code, we.Message, code)
	}
	return we
}

// httpDo sends method path with body and headers to addr and returns the status, the
// WWW-Authenticate header and the body.
func httpDo(t testing.TB, method, addr, path, body string, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, addr, path, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b.String()
}

func filePath(dir, name string) string { return filepath.Join(dir, name) }
