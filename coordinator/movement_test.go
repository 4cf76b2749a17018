package coordinator

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/lease/minimal"
)

// coverOnce reports whether the workers' latest leases cover the ring with no overlap, each share
// within [lo, hi] of the ring.
func coverOnce(lo, hi float64, workers ...*testWorker) bool {
	var all lease.Ranges
	for _, w := range workers {
		g, ok := w.latest()
		if !ok || g.lease.Ranges.Overlaps(all) {
			return false
		}
		if f := g.lease.Ranges.Fraction(); f < lo || f > hi {
			return false
		}
		all = all.Union(g.lease.Ranges)
	}
	return all.Equal(lease.Ranges{lease.FullRing})
}

// TestMinimalMovementThroughTheAdminAPI: a ring of two is switched to the minimal mode through a
// follower (the switch of a settled ring moves nothing: no new epoch); a third worker joins and
// takes its third from the two; a rolling restart of it (crash, new incarnation of the id) gets the
// same ranges back while the others keep their epochs; a crash with no return is handed on by the
// leader after the return delay; every node's view shows the mode; no token is ever usable by two
// workers at once.
func TestMinimalMovementThroughTheAdminAPI(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	addrs := c.rsocketAddrs()
	a, b := startSplitPair(t, addrs)
	ga, _ := a.latest()
	gb, _ := b.latest()

	var got admin.MovementAnswer
	status, body := post(t, follower.HTTPAddr(), ringPath(testRing, admin.ActionMovement), `{"mode":"minimal"}`, &got)
	if status != http.StatusOK || got.Ring != testRing || got.LeaderID != leader.cfg.NodeID || got.Movement.Mode != fsm.ModeMinimal ||
		got.Movement.Tolerance != minimal.DefaultTolerance || got.Movement.MaxRanges != minimal.DefaultMaxRanges || got.Movement.SinceMs == 0 {
		t.Fatalf("minimal mode through %s: %d %s", follower.cfg.NodeID, status, body)
	}
	for _, n := range c.nodes {
		eventually(t, 5*time.Second, n.cfg.NodeID+" shows the minimal mode", func() bool {
			r, ok := n.View().Ring(testRing)
			return ok && r.Movement.Mode == fsm.ModeMinimal
		})
	}

	counting := c.leader()
	movedBefore := ringMetric(t, counting, "retryring_coordinator_ring_tokens_moved_total")
	cw := newTestWorker(t, "c", addrs...).start()
	tau := minimal.DefaultTolerance
	eventually(t, 10*time.Second, "a, b and c share the ring within the tolerance", func() bool {
		return coverOnce((1-tau)/3-1e-9, (1+tau)/3+1e-9, a, b, cw)
	})
	// The join moved c's share, no more: within 1/(N+1) + τ/N of the ring, and at least the lower
	// bound of a third. The counter is the leader's own: a leader change meanwhile (a loaded
	// machine) leaves nothing to compare.
	moved := (ringMetric(t, counting, "retryring_coordinator_ring_tokens_moved_total") - movedBefore) / math.Pow(2, 64)
	if c.leader() != counting {
		t.Logf("the leader changed during c's join: tokens moved not checked")
	} else if moved < (1-tau)/3-1e-9 || moved > 1.0/3+tau/2+1e-9 {
		t.Errorf("tokens moved by c's join: %.4f of the ring, want within [%.4f, %.4f]", moved, (1-tau)/3, 1.0/3+tau/2)
	}
	if most := ringMetric(t, c.leader(), "retryring_coordinator_ring_member_ranges_max"); most < 1 || most > minimal.DefaultMaxRanges {
		t.Errorf("most ranges of a member: %v", most)
	}
	page := getPage(t, follower.HTTPAddr())
	if !strings.Contains(page, "minimal movement, tolerance 0.1, max ranges 16") {
		t.Errorf("the ring page does not show the minimal mode:\n%s", page)
	}
	if g, _ := a.latest(); g.lease.Epoch == ga.lease.Epoch {
		t.Fatalf("a gave c nothing: still epoch %d", g.lease.Epoch)
	}
	if g, _ := b.latest(); g.lease.Epoch == gb.lease.Epoch {
		t.Fatalf("b gave c nothing: still epoch %d", g.lease.Epoch)
	}

	// A rolling restart of c: the new incarnation gets exactly c's ranges back, a and b keep theirs.
	ga, _ = a.latest()
	gb, _ = b.latest()
	gc, _ := cw.latest()
	cw.close()
	c2 := newTestWorker(t, "c", addrs...)
	c2.inc = "c-inc2"
	c2.start()
	eventually(t, 15*time.Second, "the new incarnation of c holds c's ranges", func() bool {
		g, ok := c2.latest()
		return ok && g.lease.Ranges.Equal(gc.lease.Ranges) && g.lease.NodeIndex == gc.lease.NodeIndex
	})
	if g, _ := a.latest(); g.lease.Epoch != ga.lease.Epoch || !g.lease.Ranges.Equal(ga.lease.Ranges) {
		t.Fatalf("the restart of c moved a: epoch %d %v, was %d %v", g.lease.Epoch, g.lease.Ranges, ga.lease.Epoch, ga.lease.Ranges)
	}
	if g, _ := b.latest(); g.lease.Epoch != gb.lease.Epoch || !g.lease.Ranges.Equal(gb.lease.Ranges) {
		t.Fatalf("the restart of c moved b: epoch %d %v, was %d %v", g.lease.Epoch, g.lease.Ranges, gb.lease.Epoch, gb.lease.Ranges)
	}

	// c crashes for good: its slot waits the return delay, then the leader hands it on.
	c2.close()
	eventually(t, 10*time.Second, "c's slot reserved", func() bool {
		r, ok := c.leader().View().Ring(testRing)
		return ok && strings.Join(r.Movement.Reserved, ",") == "c"
	})
	eventually(t, minimal.DefaultReturnDelay+20*time.Second, "a and b share the ring again", func() bool {
		return coverOnce((1-tau)/2-1e-9, (1+tau)/2+1e-9, a, b)
	})
	checkExclusive(t, a, b, cw, c2)
}

// TestMovementRefusesBadInput: a bad mode or parameter is 400 with what is wrong, from any node,
// and nothing is committed.
func TestMovementRefusesBadInput(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers(leader)[0]
	for _, tc := range []struct{ body, want string }{
		{`{}`, `"error":"bad_request","message":"mode \"\": send {\"mode\": \"minimal\"} (with \"tolerance\" and \"max_ranges\" if not the defaults) or {\"mode\": \"contiguous\"}`},
		{`{"mode":"even"}`, `mode \"even\": send`},
		{`{"mode":"contiguous","tolerance":0.1}`, "tolerance, max_ranges, return_delay_ms, idle_ms and step_moves are parameters of the minimal mode; the contiguous mode takes none"},
		{`{"mode":"minimal","tolerance":0}`, "tolerance must be above 0 (at most 0.5), got 0"},
		{`{"mode":"minimal","tolerance":0.9}`, "tolerance 0.9 is not in (0, 0.5]"},
		{`{"mode":"minimal","max_ranges":0}`, "max_ranges must be at least 1, got 0"},
		{`{"mode":"minimal","max_ranges":8}`, "max ranges 8 is below ⌈1/τ⌉+2 = 12, the pieces a join may take"},
		{`{"mode":"minimal","maxranges":8}`, "unknown field"},
	} {
		for _, n := range []*Node{leader, follower} {
			status, body := post(t, n.HTTPAddr(), ringPath(testRing, admin.ActionMovement), tc.body, nil)
			if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("%s through %s: %d %s, want 400 with %q", tc.body, n.cfg.NodeID, status, body, tc.want)
			}
		}
	}
	if _, ok := leader.View().Ring(testRing); ok {
		t.Fatalf("a refused setting made a ring")
	}
}

// TestMovementWaitsForTheUpgrade: while a coordinator runs FSM version 5, the minimal mode is
// refused (409 upgrade_incomplete naming it, "registered version 5", or "(this node) runs version 5"
// when it leads) through any node, and nothing is committed.
func TestMovementWaitsForTheUpgrade(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *Config) {
		if i == 2 {
			cfg.fsmVersion = 5
		}
	})
	eventually(t, 15*time.Second, "c3 registered at version 5", func() bool {
		for _, cv := range c.leader().View().Coordinators {
			if cv.ID == "c3" {
				return cv.FSMVersion == 5
			}
		}
		return false
	})
	for _, n := range c.nodes {
		status, body := post(t, n.HTTPAddr(), ringPath(testRing, admin.ActionMovement), `{"mode":"minimal"}`, nil)
		if status != http.StatusConflict || !strings.Contains(body, admin.CodeUpgradeIncomplete) ||
			!strings.Contains(body, "set_movement needs FSM version 6 on every coordinator, and c3 ") || !strings.Contains(body, " version 5: finish the rolling upgrade first") {
			t.Fatalf("minimal mode through %s with c3 at version 5: %d %s", n.cfg.NodeID, status, body)
		}
	}
	if err := c.leader().apply(&fsm.HandOn{Ring: testRing, WorkerID: "a"}); !errors.Is(err, ErrUpgradeIncomplete) {
		t.Fatalf("a hand-on with c3 at version 5: %v", err)
	}
	if _, ok := c.leader().View().Ring(testRing); ok {
		t.Fatalf("a refused setting made a ring")
	}
}

// ringMetric reads the value of a per-ring series of testRing from node n's /metrics; 0 when the
// series is absent (a counter nothing added to yet).
func ringMetric(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	series := name + `{cluster="` + testRing.Cluster + `",region="` + testRing.Region + `",service="` + testRing.Service + `"} `
	for _, line := range strings.Split(getBody(t, n.HTTPAddr(), "/metrics"), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

func getPage(t *testing.T, addr string) string { return getBody(t, addr, admin.PathPage) }

func getBody(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
