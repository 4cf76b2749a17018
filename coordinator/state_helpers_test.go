package coordinator

import (
	"testing"
	"time"

	"github.com/retryring/retryring/fsm"
)

// Helpers for tests that build a committed state by hand (the leader's own decisions are tested
// in coordinator/leader, which has its own).

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func apply(t *testing.T, s *fsm.State, cmds ...fsm.Command) {
	t.Helper()
	for _, c := range cmds {
		if err := s.Apply(c); err != nil {
			t.Fatalf("apply %+v: %v", c, err)
		}
	}
}

func planAll(t *testing.T, s *fsm.State) {
	t.Helper()
	if a := fsm.Plan(s.Ring(testRing)); a != nil {
		apply(t, s, a)
	}
}

func mid(worker string) memberID {
	return memberID{Ring: fsm.RingID(testRing), WorkerID: worker, Incarnation: worker + "-1"}
}

func join(worker string) *fsm.Join {
	return &fsm.Join{Ring: testRing, WorkerID: worker, Incarnation: worker + "-1"}
}
