package coordinator

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
)

// A rolling upgrade in progress: c3 still runs FSM version 1. The leader refuses to propose a
// command version 1 does not know, naming the node that holds the upgrade up; a node that meets
// such a command anyway (here proposed past the gate) stops applying and says so on /readyz,
// while the others apply it.
func TestVersionGateAndFailStop(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *Config) {
		if i == 2 {
			cfg.fsmVersion = 1
		}
	})
	old := c.nodes[2]
	var leader *Node
	eventually(t, 15*time.Second, "a leader other than the old node, with c3 registered at version 1", func() bool {
		l := c.leader()
		if l == old {
			_ = l.raft.LeadershipTransfer().Error()
			return false
		}
		leader = l
		for _, cv := range l.View().Coordinators {
			if cv.ID == "c3" {
				return cv.FSMVersion == 1
			}
		}
		return false
	})

	pause := &fsm.Pause{Ring: testRing, Reason: "deploy"}
	err := leader.apply(pause)
	if !errors.Is(err, ErrUpgradeIncomplete) || !strings.Contains(err.Error(), "c3 registered version 1") {
		t.Fatalf("proposing a pause with c3 at version 1: %v, want ErrUpgradeIncomplete naming c3", err)
	}
	// The admin caller is told what holds the change up, through any node.
	for _, n := range c.nodes {
		status, body := post(t, n.HTTPAddr(), ringPath(testRing, admin.ActionPause), `{"reason":"deploy"}`, nil)
		if status != http.StatusConflict || !strings.Contains(body, admin.CodeUpgradeIncomplete) || !strings.Contains(body, "c3 registered version 1") {
			t.Fatalf("pause through %s with c3 at version 1: %d %s, want 409 upgrade_incomplete naming c3", n.cfg.NodeID, status, body)
		}
	}
	if got := controlsOn(leader); got != nil {
		t.Fatalf("a refused pause was committed: %+v", got)
	}
	// The leader's own lease timing is not replicated either while c3 is behind: the old node would halt on it.
	leader.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Timing != nil {
			t.Fatalf("a timing was committed past the gate: %+v", s.Timing)
		}
	})

	// Past the gate, as an old node added to an upgraded cluster would meet it.
	b, err := fsm.Encode(pause)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.awaitFuture(leader.raft.Apply(b, time.Second)); err != nil {
		t.Fatalf("commit past the gate: %v", err)
	}
	eventually(t, 10*time.Second, "c3 halted and c1, c2 paused", func() bool {
		if old.fsm.Halted() == nil {
			return false
		}
		for _, n := range c.nodes[:2] {
			paused := false
			n.fsm.View(func(s *fsm.State, _ uint64) {
				r := s.Ring(testRing)
				paused = r != nil && r.Controls != nil && r.Controls.Paused
			})
			if !paused {
				return false
			}
		}
		return true
	})
	var rd admin.Readiness
	if status := getJSON(t, old.HTTPAddr(), admin.PathReadyz, &rd); status != 503 || rd.Ready || !strings.Contains(rd.Reason, "stopped applying") {
		t.Fatalf("/readyz of the halted node: %d %+v", status, rd)
	}
	if status := getJSON(t, leader.HTTPAddr(), admin.PathReadyz, &rd); status != 200 {
		t.Fatalf("/readyz of the leader: %d %+v", status, rd)
	}
	// Nothing after the unknown entry is applied on c3: not even a lease command.
	if err := leader.apply(&fsm.RegisterCoordinator{Coordinator: fsm.Coordinator{ID: "c9", RaftAddr: "c9:1"}}); err != nil {
		t.Fatalf("register: %v", err)
	}
	for _, n := range c.nodes[:2] {
		eventually(t, 5*time.Second, n.cfg.NodeID+" applied the registration", func() bool {
			known := false
			n.fsm.View(func(s *fsm.State, _ uint64) { known = s.Coordinators["c9"] != nil })
			return known
		})
	}
	old.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Coordinators["c9"] != nil {
			t.Fatalf("the halted node applied an entry after the one it does not know")
		}
	})
}
