package e2e

import (
	"fmt"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// The operations below are what scenarios (and the chaos schedule) do to a cluster. Each records
// its fault for the duplicate check and, where the safety argument promises a bound, a check of
// that bound that runs at the end (scenario.checkBounds).

// holderBound is TTL×(1+ρ): how long after its last demand a worker may use a lease.
var holderBound = time.Duration(float64(timing.TTL) * (1 + timing.Drift))

// leaderLeaseTimeout is the coordinators' Raft leader lease timeout (their default): a leader
// that lost its quorum may still send lease elements for that long after its last contact.
const leaderLeaseTimeout = 250 * time.Millisecond

// quietCheck demands that no execution by worker (any worker if "") under an epoch up to
// maxEpoch (any epoch if 0) started in [from, to): a lease that had ended was used.
type quietCheck struct {
	what     string
	worker   string
	maxEpoch uint64
	from, to time.Time
}

// checkBounds runs every quietCheck against the stub's record.
func (s *scenario) checkBounds() {
	s.t.Helper()
	execs := s.ds.Executions()
	for _, q := range s.quiet {
		bad := 0
		for _, e := range execs {
			if (q.worker == "" || e.WorkerID == q.worker) && (q.maxEpoch == 0 || e.LeaseEpoch <= q.maxEpoch) &&
				!e.Start.Before(q.from) && e.Start.Before(q.to) {
				if bad < 5 {
					s.t.Errorf("%s: %s executed %s under epoch %d at %s, in [%s, %s) when no lease of it was usable",
						q.what, e.WorkerID, e.TransactionID, e.LeaseEpoch, e.Start.Format("15:04:05.000"),
						q.from.Format("15:04:05.000"), q.to.Format("15:04:05.000"))
				}
				bad++
			}
		}
		if bad > 0 {
			s.t.Errorf("%s: %d executions on a lease that had ended", q.what, bad)
		}
	}
}

// killWorker kills w with SIGKILL and, after pause, starts it again (a new incarnation, which
// gets nothing before the old one's lease ran out).
func (s *scenario) killWorker(w *proc.Worker, pause time.Duration) error {
	at := time.Now()
	if err := w.Kill9(); err != nil {
		return err
	}
	s.addFault(fault{kind: workerCrash, worker: w.ID, at: at})
	s.mark("killed %s", w.ID)
	time.Sleep(pause)
	if err := s.c.RestartWorker(s.ctx(time.Minute), w); err != nil {
		return err
	}
	s.mark("restarted %s", w.ID)
	return nil
}

// freezeWorker stops w with SIGSTOP for d, longer than a lease, then resumes it. It must not act
// on the lease it held when it froze: no execution of it under that epoch or an older one may
// start after that lease ended (its last demand was sent before the freeze).
func (s *scenario) freezeWorker(w *proc.Worker, d time.Duration) error {
	epoch := s.memberEpoch(w.ID)
	if err := w.Stop(); err != nil {
		return err
	}
	at := s.mark("froze %s (epoch %d)", w.ID, epoch)
	s.addFault(fault{kind: workerCrash, worker: w.ID, at: at})
	for _, e := range s.ds.Executions() {
		if e.WorkerID == w.ID && e.Start.Before(at) {
			epoch = max(epoch, e.LeaseEpoch)
		}
	}
	time.Sleep(d)
	if err := w.Cont(); err != nil {
		return err
	}
	s.mark("resumed %s", w.ID)
	s.quiet = append(s.quiet, quietCheck{
		what: fmt.Sprintf("stale lease after SIGSTOP of %s", w.ID), worker: w.ID, maxEpoch: epoch,
		from: at.Add(holderBound), to: time.Now().Add(24 * time.Hour),
	})
	return nil
}

// termWorker stops w gracefully (SIGTERM: finish or keep in-flight work, release, leave), demands
// exit status 0, and starts it again. Not a fault: nothing may run twice because of it.
func (s *scenario) termWorker(w *proc.Worker) error {
	s.mark("SIGTERM %s", w.ID)
	if err := w.Term(proc.DefaultTermWait); err != nil {
		return fmt.Errorf("graceful stop of %s: %w", w.ID, err)
	}
	if err := s.c.RestartWorker(s.ctx(time.Minute), w); err != nil {
		return err
	}
	s.mark("restarted %s", w.ID)
	return nil
}

// killLeader kills the coordinator leader with SIGKILL, waits for a new one and starts the old one
// again. It returns how long the election took as observed.
func (s *scenario) killLeader() (time.Duration, error) {
	leader, _, err := s.c.Leader(s.ctx(10 * time.Second))
	if err != nil {
		return 0, err
	}
	at := time.Now()
	if err := leader.Kill9(); err != nil {
		return 0, err
	}
	s.mark("killed leader %s", leader.ID)
	next, err := s.c.WaitLeader(s.ctx(time.Minute))
	if err != nil {
		return 0, err
	}
	elected := s.mark("new leader %s", next.ID)
	// Leases may lapse if the election outlasts them; an execution that ended as its lease ran
	// out may then lack its marker.
	s.addFault(fault{kind: leaseLapse, at: at, until: elected.Add(timing.HolderBound())})
	if err := s.c.RestartCoordinator(s.ctx(time.Minute), leader); err != nil {
		return 0, err
	}
	return elected.Sub(at), nil
}

// quorumLoss kills both followers, so that the leader lives on without a quorum, keeps them down
// for d past the moment every lease must have ended, and starts them again. No execution may
// start between that moment and the restart.
func (s *scenario) quorumLoss(d time.Duration) error {
	leader, _, err := s.c.Leader(s.ctx(10 * time.Second))
	if err != nil {
		return err
	}
	var down []*proc.Coordinator
	for _, co := range s.c.Coordinators() {
		if co != leader && co.Running() {
			if err := co.Kill9(); err != nil {
				return err
			}
			down = append(down, co)
		}
	}
	at := s.mark("killed the followers; leader %s has no quorum", leader.ID)
	// The leader may send until one leader lease timeout after its last quorum contact; what it
	// sent is usable for TTL×(1+ρ) from a demand made before.
	leaseEnd := at.Add(leaderLeaseTimeout + holderBound + timing.Margin)
	time.Sleep(time.Until(leaseEnd) + d)
	restart := s.mark("restarting the followers")
	s.addFault(fault{kind: leaseLapse, at: at, until: leaseEnd})
	s.quiet = append(s.quiet, quietCheck{what: "execution without quorum", from: leaseEnd, to: restart})
	for _, co := range down {
		if err := s.c.RestartCoordinator(s.ctx(time.Minute), co); err != nil {
			return err
		}
	}
	return nil
}
