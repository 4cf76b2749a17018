package e2e

import (
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// TestRollingUpgrade restarts the three coordinators one by one with SIGTERM, the followers
// first and the leader last (docs/operations.md, "Rolling upgrade"), while real workers drain a
// backlog. Each step keeps a quorum: the other two run and a leader is known while the node is
// down, and the restarted node is ready (caught up) before the next one stops. No worker's cover
// lapses (the lease sampler sees no part of the ring without a usable lease, by the workers' own
// answers), no assignment changes (every worker keeps its epoch), and the drain ends with
// nothing lost and nothing executed twice.
func TestRollingUpgrade(t *testing.T) {
	s := newScenario(t, shortOptions())
	before, err := s.c.WaitSettled(s.ctx(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s.recordBackdated(2000)
	s.waitExecutions(200)
	sampler := s.c.SampleLeases(0)

	leader, _, err := s.c.Leader(s.ctx(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	order := []*proc.Coordinator{}
	for _, co := range s.c.Coordinators() {
		if co != leader {
			order = append(order, co)
		}
	}
	order = append(order, leader)
	for _, co := range order {
		for _, other := range s.c.Coordinators() {
			if other != co && !other.Ready(s.ctx(5*time.Second)) {
				t.Fatalf("before stopping %s: %s is not ready, stopping %s would lose the quorum", co.ID, other.ID, co.ID)
			}
		}
		s.mark("SIGTERM %s", co.ID)
		if err := co.Term(proc.DefaultTermWait); err != nil {
			t.Fatalf("%s did not stop on SIGTERM: %v", co.ID, err)
		}
		next, err := s.c.WaitLeader(s.ctx(30 * time.Second))
		if err != nil {
			t.Fatalf("no leader while %s was down: %v", co.ID, err)
		}
		s.mark("%s down, leader %s", co.ID, next.ID)
		if err := s.c.RestartCoordinator(s.ctx(time.Minute), co); err != nil {
			t.Fatal(err)
		}
		if err := co.WaitReady(s.ctx(time.Minute)); err != nil {
			t.Fatalf("%s not ready after its restart: %v", co.ID, err)
		}
		s.mark("%s back and ready", co.ID)
		// Watch the cluster for two renewals before the next step, as an operator checks ctl
		// peers: the sampler sees every worker renewed by whichever node leads now.
		time.Sleep(2 * timing.Renewal)
	}
	after, err := s.c.WaitSettled(s.ctx(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rep := sampler.Stop()
	t.Logf("lease samples %d (%d without a leader); longest gap by the workers' answers %v, by the leader's view %v",
		rep.Samples, rep.Failed, rep.Workers.LongestGap, rep.Leader.LongestGap)
	for _, g := range rep.Workers.Gaps {
		t.Errorf("a worker's cover lapsed during the rolling upgrade: %v from %s, %v, last held by %v",
			g.Length().Round(time.Millisecond), g.From.Format("15:04:05.000"), g.Ranges, g.Holders)
	}
	rb, _ := s.c.RingOf(before)
	ra, _ := s.c.RingOf(after)
	was := map[string]uint64{}
	for _, m := range rb.Members {
		was[m.WorkerID] = m.Epoch
	}
	for _, m := range ra.Members {
		if was[m.WorkerID] != m.Epoch {
			t.Errorf("%s went from epoch %d to %d across the rolling upgrade: an assignment changed", m.WorkerID, was[m.WorkerID], m.Epoch)
		}
	}
	s.waitDrained(drainWait)
	s.check()
}
