package ringtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease/minimal"
)

// setMovement posts a movement call for the cluster's ring to co.
func setMovement(t *testing.T, c *Cluster, co *Coordinator, body string) admin.MovementAnswer {
	t.Helper()
	ring := c.Options().Ring
	url := fmt.Sprintf("http://%s%s%s/%s/%s/%s", co.Node().HTTPAddr(), admin.PathRings, ring.Region, ring.Cluster, ring.Service, admin.ActionMovement)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a admin.MovementAnswer
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
		t.Fatalf("POST %s %s: %d %s", url, body, resp.StatusCode, b)
	}
	return a
}

// withinTolerance fails the test unless every active worker's lease holds a share within τ of
// the mean.
func withinTolerance(t *testing.T, c *Cluster, tau float64) {
	t.Helper()
	active := c.ActiveWorkers()
	mean := 1 / float64(len(active))
	for _, w := range active {
		l, ok := w.Lease()
		if f := l.Ranges.Fraction(); !ok || f < (1-tau)*mean-1e-9 || f > (1+tau)*mean+1e-9 {
			t.Errorf("%s holds %.4f of the ring, outside %.4f ± %.0f%%", w.Holder(), f, mean, tau*100)
		}
	}
}

// TestMinimalMovementJoinsLeavesAndRestarts: real Raft, real RSocket, real lease clients. A ring of
// three is switched to the minimal mode through a follower (nothing moves), a fourth worker joins
// (it takes its share, the ring settles within the tolerance), one leaves cleanly (its ranges wait
// the return delay, then go to the others), one restarts (crash, then a new incarnation of its id:
// it gets its ranges back). Exclusivity holds throughout and coverage in every settled window
// (CheckHistory).
func TestMinimalMovementJoinsLeavesAndRestarts(t *testing.T) {
	c := NewCluster(t, Options{})
	a, b := c.AddWorker("a"), c.AddWorker("b")
	c.AddWorker("c")
	c.WaitSettled(settleWait)

	got := setMovement(t, c, follower(c), `{"mode":"minimal"}`)
	if got.Movement.Mode != fsm.ModeMinimal {
		t.Fatalf("movement answer %+v", got)
	}
	before, _ := a.Lease()
	c.WaitSettled(settleWait)
	if after, _ := a.Lease(); after.Epoch != before.Epoch {
		t.Fatalf("switching a settled ring moved a: epoch %d, was %d", after.Epoch, before.Epoch)
	}

	c.AddWorker("d")
	c.WaitSettled(settleWait)
	withinTolerance(t, c, minimal.DefaultTolerance)

	if err := a.Leave(); err != nil {
		t.Fatalf("a's leave: %v", err)
	}
	c.WaitSettled(settleWait + minimal.DefaultReturnDelay)
	withinTolerance(t, c, minimal.DefaultTolerance)

	old, _ := b.Lease()
	b.Stop()
	b2 := b.NewIncarnation()
	c.WaitSettled(settleWait)
	if l, ok := b2.Lease(); !ok || !l.Ranges.Equal(old.Ranges) || l.NodeIndex != old.NodeIndex {
		t.Fatalf("b's new incarnation holds node %d %v, b held node %d %v", l.NodeIndex, l.Ranges, old.NodeIndex, old.Ranges)
	}
	if r, ok := c.Leader().View().Ring(c.Options().Ring); !ok || len(r.Movement.Reserved) != 0 || r.Movement.Mode != fsm.ModeMinimal {
		t.Fatalf("the leader's ring after the restart: %+v", r.Movement)
	}
	c.CheckHistory()
}
