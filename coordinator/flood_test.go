//go:build !race

package coordinator

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/flood"
)

// TestFloodBesideTwoRealWorkers is issue 10's flood: 500 garbage connections and 200 SETUPs
// without a valid token per second, for 30 s (RETRYRING_FLOOD_SECONDS changes it), at the
// leader, beside two real workers (worker/leaseclient) holding the ring with a token under the
// default lease timing and the limits docs/operations.md recommends. Asserted: nothing crashed
// (every node answers), no bad SETUP got an element, and both workers hold their leases at the
// end. The longest lapse of their cover during the flood is logged, not asserted (goal 0; the
// figure is bench/flood's).
//
// Not under the race detector: it slows the in-process cluster, the two clients and the flood
// (all in this one process) five- to tenfold, so that on two cores the flood starves the workers'
// keepalives; their reconnects then run into rsocket-go's own race between a closing connection
// and a request being queued (the one FuzzRSocketServerRawBytes describes). The flood is measured
// with separate processes in bench/flood.
func TestFloodBesideTwoRealWorkers(t *testing.T) {
	duration := 30 * time.Second
	if s := os.Getenv("RETRYRING_FLOOD_SECONDS"); s != "" {
		d, err := time.ParseDuration(s + "s")
		if err != nil {
			t.Fatalf("RETRYRING_FLOOD_SECONDS=%q: %v", s, err)
		}
		duration = d
	}
	dir := authDir(t)
	writeStandardAuth(t, dir, tokenLine(testRing, tokOrders))
	c := authCluster(t, dir, func(cfg *Config) {
		cfg.Timing = lease.Timing{} // the defaults: TTL 10 s, renewal 2 s
		cfg.MaxConnections = 4096
		cfg.MaxSetupsPerSecond = 1000
		cfg.MaxStreamsPerRing = 64
	})
	leader := c.leader()
	w1 := startRealWorker(t, "w1", testRing, tokOrders, c.rsocketAddrs())
	w2 := startRealWorker(t, "w2", testRing, tokOrders, c.rsocketAddrs())
	eventually(t, 60*time.Second, "both workers hold a lease", func() bool { return w1.holds() && w2.holds() })

	cover := flood.WatchCover(5*time.Millisecond, w1.holds, w2.holds)
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	st := flood.Run(ctx, flood.Config{Addrs: []string{leader.RSocketAddr()}, GarbagePerSecond: 500, SetupsPerSecond: 200,
		Ring: testRing, WorkerIDs: []string{"w1", "w2"}})
	longest, lapses := cover.Stop()

	t.Logf("flood of %v: %d garbage connections, %d bad SETUPs (refused %v, accepted %d, closed unanswered %d), %d dial errors, %d skipped",
		duration, st.Garbage, st.Setups, st.Refused, st.Accepted, st.Closed, st.DialErrors, st.Skipped)
	t.Logf("longest lapse of cover: w1 %v (%d lapses), w2 %v (%d lapses)", longest[0], lapses[0], longest[1], lapses[1])
	var reasons []string
	for r := range numRefusals {
		reasons = append(reasons, r.String()+"="+strconv.FormatUint(refusals(leader, r), 10))
	}
	t.Logf("leader refusals: %v", reasons)

	if st.Accepted != 0 {
		t.Errorf("%d SETUPs without a valid token got a lease element", st.Accepted)
	}
	if st.Setups == 0 || st.Garbage == 0 {
		t.Fatalf("the flood sent nothing: %+v", st)
	}
	for _, n := range c.nodes {
		if status := getJSON(t, n.HTTPAddr(), admin.PathHealthz, nil); status != http.StatusOK {
			t.Errorf("%s: /healthz %d after the flood", n.cfg.NodeID, status)
		}
	}
	if !w1.holds() || !w2.holds() {
		t.Errorf("after the flood: w1 holds %v, w2 holds %v", w1.holds(), w2.holds())
	}
}
