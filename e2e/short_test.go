package e2e

import (
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// TestShort runs the short scenarios, two at a time (go test's -parallel, GOMAXPROCS by default):
// the real-time one spends most of its minutes waiting for windows to open, so it runs beside
// the others. The Cassandra restart is not among them: it runs alone (TestCassandraRestart).
func TestShort(t *testing.T) {
	for _, sc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"RealTimeW1", testRealTimeW1},
		{"SteadyDrain", testSteadyDrain},
		{"WorkerKill9", testWorkerKill9},
		{"WorkerSIGSTOP", testWorkerSIGSTOP},
		{"RollingRestart", testRollingRestart},
		{"LeaderKill", testLeaderKill},
		{"QuorumLoss", testQuorumLoss},
		{"WorkersAdded", testWorkersAdded},
		{"RepeatedImports", testRepeatedImports},
		{"BacklogBehindW1", testBacklogBehindW1},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t)
		})
	}
}

// testSteadyDrain: three workers drain 3,000 imported failures; 2% of them fail permanently and
// must be dead-lettered, the rest done once each.
func testSteadyDrain(t *testing.T) {
	o := shortOptions()
	o.Downstream.PermanentFraction = 0.02
	s := newScenario(t, o)
	s.waitSettled()
	sampler := s.c.SampleLeases(0)
	s.recordBackdated(3000)
	s.waitDrained(drainWait)
	rep := sampler.Stop()
	v := s.check()
	if v.acc.deadLettered == 0 {
		t.Error("no permanent failure was dead-lettered")
	}
	t.Logf("longest time part of the ring had no usable lease: %v by the workers' answers, %v by the leader's view (%d samples)",
		rep.Workers.LongestGap, rep.Leader.LongestGap, rep.Samples)
}

// testWorkerKill9: the busiest worker is killed with SIGKILL mid-drain and restarted at once (a
// new incarnation, which must wait for the old one's lease). At most its in-flight executions
// run twice.
func testWorkerKill9(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	s.recordBackdated(3000)
	if err := s.killWorker(s.busyWorker(300), time.Second); err != nil {
		t.Fatal(err)
	}
	s.waitDrained(drainWait)
	s.waitSettled()
	s.check()
}

// testWorkerSIGSTOP: the busiest worker is frozen for longer than its lease while the others
// take its ranges over, then resumed. It must not act on its stale lease.
func testWorkerSIGSTOP(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	s.recordBackdated(3000)
	if err := s.freezeWorker(s.busyWorker(300), 2*timing.TTL+2*time.Second); err != nil {
		t.Fatal(err)
	}
	s.waitDrained(drainWait)
	s.waitSettled()
	s.check()
}

// testRollingRestart: every worker in turn gets SIGTERM, exits with status 0 and is started
// again; the next one goes once the ring has settled. Graceful: nothing may run twice.
func testRollingRestart(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	s.recordBackdated(3000)
	s.waitExecutions(200)
	for _, w := range s.c.Workers() {
		if err := s.termWorker(w); err != nil {
			t.Fatal(err)
		}
		s.waitSettled()
	}
	s.waitDrained(drainWait)
	s.check() // no fault recorded: every duplicate is an error
}

// testLeaderKill: the coordinator leader is killed mid-drain; a new leader renews the leases.
// When the new leader was elected before any lease could run out, no worker may lose a range
// (invariant 4): every worker keeps its epoch.
func testLeaderKill(t *testing.T) {
	s := newScenario(t, shortOptions())
	before, err := s.c.WaitSettled(s.ctx(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	s.recordBackdated(3000)
	s.waitExecutions(300)
	took, err := s.killLeader()
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.c.WaitSettled(s.ctx(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Workers hold at least TTL − renewal of lease when the leader dies.
	if took < timing.TTL-timing.Renewal {
		rb, _ := s.c.RingOf(before)
		ra, _ := s.c.RingOf(after)
		was := map[string]uint64{}
		for _, m := range rb.Members {
			was[m.WorkerID] = m.Epoch
		}
		for _, m := range ra.Members {
			if was[m.WorkerID] != m.Epoch {
				t.Errorf("invariant 4: %s went from epoch %d to %d across a failover of %v", m.WorkerID, was[m.WorkerID], m.Epoch, took)
			}
		}
	} else {
		t.Logf("failover took %v (observed), longer than a lease surely lasts: epochs may change", took)
	}
	s.waitDrained(drainWait)
	s.check()
}

// testQuorumLoss: both followers are killed, so the leader loses its quorum: it must stop
// renewing, every worker must stop executing once its lease ends, and resume once the followers
// are back.
func testQuorumLoss(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	s.recordBackdated(3000)
	s.waitExecutions(300)
	if err := s.quorumLoss(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	s.waitDrained(drainWait)
	var resumed int
	for _, e := range s.ds.Executions() {
		if e.Start.After(back) {
			resumed++
		}
	}
	t.Logf("executions after quorum returned: %d", resumed)
	s.check()
}

// testWorkersAdded: one worker starts the drain, two more join in the middle. Ranges move only
// after the first worker released them: nothing may run twice.
func testWorkersAdded(t *testing.T) {
	o := shortOptions()
	o.Workers = 1
	s := newScenario(t, o)
	s.waitSettled()
	s.recordBackdated(3000)
	s.waitExecutions(300)
	for range 2 {
		w, err := s.c.AddWorker(s.ctx(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		s.mark("added %s", w.ID)
	}
	s.waitSettled()
	s.waitDrained(drainWait)
	s.check()
}

// testRealTimeW1: the W+1 path in real time with one-minute windows. Failures are recorded now,
// at a rate, into the next window; the downstream answers 503 to the first executions, which are
// recorded again a window later and done then. Two to three minutes, mostly waiting.
func testRealTimeW1(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	s.ds.SetUnavailable(true)
	s.record(proc.RecordOptions{Count: 600, Rate: 40})
	// The first executions happen once the window opens (up to a minute after the record).
	s.waitExecutions(50)
	s.ds.SetUnavailable(false)
	s.mark("downstream available again")
	s.waitDrained(drainWait)
	s.check()
	var retried int
	for _, e := range s.ds.Executions() {
		if e.Status == 503 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no execution was answered 503: the transient path was not exercised")
	}
}

// testRepeatedImports: imports keep landing in a window that workers are draining and Node-0 is
// compacting (the late-write protocol against Node-0's checked deletes and checkpoint raises),
// with no fault at all. Nothing may be lost.
func testRepeatedImports(t *testing.T) {
	s := newScenario(t, shortOptions())
	s.waitSettled()
	for range 5 {
		s.recordBackdated(3000)
		time.Sleep(2 * time.Second)
	}
	s.waitDrained(drainWait)
	s.check()
}

// testBacklogBehindW1: a backlog in a window whose time has passed while writers fill W+1 in real
// time. Node-0 must keep the day's scan checkpoint at the busy window, not move it to the next
// window that is still open, or the busy window's rows are never read again.
func testBacklogBehindW1(t *testing.T) {
	o := shortOptions()
	o.Downstream.Latency = 60 * time.Millisecond // 3,000 rows take about 20 s: a backlog
	s := newScenario(t, o)
	s.waitSettled()
	stop := s.watchDirectory()
	defer stop()
	type result struct {
		b   proc.Batch
		err error
	}
	live := make(chan result, 1)
	go func() {
		b, err := s.c.Record(s.ctx(time.Minute), proc.RecordOptions{Count: 300, Instances: shortInstances, Rate: 20})
		live <- result{b, err}
	}()
	s.recordBackdated(3000)
	r := <-live
	if r.err != nil {
		t.Fatalf("live record: %v\n%s", r.err, r.b.Output)
	}
	s.batches = append(s.batches, r.b)
	s.waitDrained(drainWait)
	s.check()
}
