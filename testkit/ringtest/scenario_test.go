package ringtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker/leaseclient"
)

// settleWait bounds every wait for the ring to settle: generous for a loaded 2-core machine, and
// only ever reached when something is wrong.
const settleWait = 20 * time.Second

func TestElectionAndReElection(t *testing.T) {
	c := NewCluster(t, Options{})
	l := c.Leader()
	for _, co := range c.Coordinators() {
		if id, addr := co.Node().Leader(); id != l.ID || addr != l.RSocketAddr() {
			t.Fatalf("%s sees leader %q at %q, want %s at %s", co.ID, id, addr, l.ID, l.RSocketAddr())
		}
	}
	a := c.AddWorker("a")
	c.WaitSettled(settleWait)
	if got, ok := a.Lease(); !ok || !got.IsNode0() || !got.Ranges.Equal(lease.Ranges{lease.FullRing}) {
		t.Fatalf("a lone worker holds %+v, want the whole ring as Node-0", got)
	}

	killed := c.KillLeader()
	next := c.WaitReady(settleWait)
	if next == killed {
		t.Fatalf("the killed coordinator %s still leads", killed.ID)
	}
	c.Restart(killed.Index)
	c.WaitReady(settleWait)
	c.WaitSettled(settleWait)
	c.CheckHistory()
}

// TestLeaderKillKeepsLeases is invariant 4: a leader change renews every lease without a worker
// losing a range, when the new leader's renewal reaches the worker before its lease expires.
func TestLeaderKillKeepsLeases(t *testing.T) {
	c := NewCluster(t, Options{Timing: lease.Timing{TTL: 3 * time.Second, Renewal: 500 * time.Millisecond}})
	workers := []*Worker{c.AddWorker("a"), c.AddWorker("b"), c.AddWorker("c")}
	c.WaitSettled(settleWait)

	c.WaitRenewals(2, settleWait)

	// Besides the recorded history, ask every worker's guard directly, all through the failover.
	refused := sampleGuards(c, workers)
	killed := c.KillLeader()
	kill, _ := c.Last(EventCoordKilled, "")
	if next := c.WaitReady(settleWait); next == killed {
		t.Fatalf("the killed coordinator %s still leads", killed.ID)
	}
	resumed := map[*Worker]time.Duration{}
	for _, w := range workers {
		at, err := c.WaitAnswerAfter(w, kill.At, settleWait)
		if err != nil {
			t.Fatal(err)
		}
		resumed[w] = at
	}
	end := c.Now()
	refusals := refused()
	ivs := c.Recorder().Intervals()
	events := c.Recorder().Events()
	exercised := 0
	for _, w := range workers {
		if _, ok := liveAt(ivs, w, kill.At); !ok {
			t.Fatalf("%s held nothing when the leader was killed", w.Holder())
		}
		// The lease that had to last is the one held just before the new leader's first element:
		// the history's interval cannot say, since that element extends it when it came in time.
		// The guard refuses once less than its margin is left, so "before the lease ended" means
		// before the margin began.
		held, ok := expiryBefore(events, w, resumed[w])
		if !ok {
			t.Fatalf("%s installed nothing before %v", w.Holder(), resumed[w])
		}
		if held-leaseclient.DefaultGuardMargin < resumed[w] {
			t.Logf("%s: the new leader's first element came %v after the kill, too late for a lease ending %v after it: invariant 4 does not apply",
				w.Holder(), resumed[w]-kill.At, held-kill.At)
			continue
		}
		exercised++
		if vs := CheckKept(ivs, w.ID, w.Incarnation, kill.At, end); len(vs) > 0 {
			t.Errorf("%s lost part of its lease across the leader change:%s", w.Holder(), FormatViolations(vs, 10))
		}
		if r, ok := refusals[w]; ok {
			t.Errorf("%s's guard refused at %v, during the leader change: %v", w.Holder(), r.at, r.err)
		}
	}
	t.Logf("leader change: %d of %d workers renewed within their lease", exercised, len(workers))
	c.WaitSettled(settleWait)
	c.CheckHistory()
}

// refusal is the first time a worker's guard refused an operation.
type refusal struct {
	at  time.Duration
	err error
}

// sampleGuards asks each worker's guard, every millisecond, whether an operation could start on
// each of the worker's ranges now; the returned function stops sampling and gives the first
// refusal of each worker, if any.
func sampleGuards(c *Cluster, workers []*Worker) func() map[*Worker]refusal {
	stop, done := make(chan struct{}), make(chan struct{})
	out := map[*Worker]refusal{}
	held := map[*Worker]lease.Ranges{}
	for _, w := range workers {
		if l, ok := w.Lease(); ok {
			held[w] = l.Ranges
		}
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, w := range workers {
				if _, seen := out[w]; seen {
					continue
				}
				for _, r := range held[w] {
					for _, token := range []int64{r.Start, r.End} {
						if _, err := w.Guard().CheckToken(token, 0); err != nil {
							out[w] = refusal{at: c.Now(), err: err}
						}
					}
				}
			}
		}
	}()
	return func() map[*Worker]refusal {
		close(stop)
		<-done
		return out
	}
}

// expiryBefore is the expiry of w's last element installed before instant at.
func expiryBefore(events []Event, w *Worker, at time.Duration) (time.Duration, bool) {
	var expiry time.Duration
	found := false
	for _, e := range events {
		if e.Kind == EventInstall && e.At < at && e.Worker == w.ID && e.Incarnation == w.Incarnation {
			expiry, found = e.Expiry, true
		}
	}
	return expiry, found
}

// liveAt returns w's interval that was usable at instant at.
func liveAt(ivs []Interval, w *Worker, at time.Duration) (Interval, bool) {
	for _, iv := range ivs {
		if iv.Holder() == w.Holder() && iv.From <= at && at < iv.To {
			return iv, true
		}
	}
	return Interval{}, false
}

// TestFollowerRedirect starts a worker that knows only a follower: it must reach the leader through
// the not_leader redirect, and its connection must still pass through the worker's own network.
func TestFollowerRedirect(t *testing.T) {
	c := NewCluster(t, Options{})
	l := c.Leader()
	follower := (l.Index + 1) % len(c.Coordinators())
	w := c.StartWorker(WorkerOptions{ID: "redirected", Coordinators: []int{follower}})
	c.WaitSettled(settleWait)
	if got := w.Client().Stats().Redirects; got == 0 {
		t.Fatalf("the worker reached the leader without a redirect (stats %+v)", w.Client().Stats())
	}
	if w.Proxy().Conns() == 0 {
		t.Fatal("the redirected connection bypasses the worker's fault proxy")
	}
	w.Cut()
	if _, err := c.WaitMemberDown(w, settleWait); err != nil {
		t.Fatal(err)
	}
	c.WaitSettled(settleWait)
	w.Heal()
	c.WaitSettled(settleWait)
	c.CheckHistory()
}

// TestNewIncarnationWaitsForTheOldLease starts a second process with a known worker id while the
// old one is silent (hung), cut off, dead, or even still running and connected: the new incarnation
// gets nothing before the old one's lease expired or was released, and the two never both hold.
func TestNewIncarnationWaitsForTheOldLease(t *testing.T) {
	for _, fault := range []string{"hang", "cut", "crash", "alive"} {
		t.Run(fault, func(t *testing.T) {
			c := NewCluster(t, Options{})
			old := c.AddWorker("a")
			c.AddWorker("b")
			c.WaitSettled(settleWait)
			switch fault {
			case "hang":
				old.Hang()
			case "cut":
				old.Cut()
			case "crash":
				old.Stop()
			}
			young := old.NewIncarnation()
			c.WaitSettled(settleWait)

			ivs := c.Recorder().Intervals()
			var oldEnd, youngStart time.Duration
			youngStart = -1
			for _, iv := range ivs {
				switch {
				case iv.Holder() == old.Holder() && iv.holds():
					oldEnd = max(oldEnd, iv.To)
				case iv.Holder() == young.Holder() && iv.holds() && youngStart < 0:
					youngStart = iv.From
				}
			}
			if youngStart < 0 {
				t.Fatalf("the new incarnation holds nothing")
			}
			if youngStart < oldEnd {
				t.Errorf("the new incarnation held ranges from %v, the old one's lease ran until %v", youngStart, oldEnd)
			}
			c.CheckHistory()
		})
	}
}

// TestHungAndCutLeader takes the leader's network away (silent; cut off; cut from its Raft peers
// only, its workers still connected to it): the others elect a new leader, the workers move to it,
// and nothing is held twice at any instant.
func TestHungAndCutLeader(t *testing.T) {
	for _, fault := range []string{"hang", "cut", "raft-only"} {
		t.Run(fault, func(t *testing.T) {
			c := NewCluster(t, Options{})
			c.AddWorker("a")
			c.AddWorker("b")
			c.WaitSettled(settleWait)
			l := c.Leader()
			switch fault {
			case "hang":
				l.Hang()
			case "cut":
				l.Cut()
			default: // cut from its peers, still streaming to its workers
				l.CutRaft()
			}
			if next := c.WaitReady(settleWait); next == l {
				t.Fatalf("the partitioned coordinator %s still leads", l.ID)
			}
			elected := c.Now()
			for _, w := range c.Workers() {
				if _, err := c.WaitInstallAfter(w, elected, settleWait); err != nil {
					t.Fatalf("%v: the worker never moved to the new leader", err)
				}
			}
			c.WaitSettled(settleWait)
			l.Heal()
			c.WaitReady(settleWait)
			c.AddWorker("c")
			c.WaitSettled(settleWait)
			c.CheckHistory()
		})
	}
}

// TestRandomMembership runs seeded random histories of 1 to 10 workers joining, leaving, crashing,
// hanging, being cut off, healing and coming back as new incarnations, with now and then a leader
// killed or a coordinator partitioned (hung or cut off, the leader or a follower), and checks every
// history: exclusivity, one Node-0 and one incarnation per id at every
// instant, coverage whenever the ring had settled. RINGTEST_SEEDS=n runs n seeds instead of the
// default few; RINGTEST_SEED=s runs seed s alone.
func TestRandomMembership(t *testing.T) {
	for _, seed := range scenarioSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runScenario(t, seed, 8)
		})
	}
}

func scenarioSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("RINGTEST_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RINGTEST_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := 3
	if s := os.Getenv("RINGTEST_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("RINGTEST_SEEDS=%q: want a positive count", s)
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

// scenario drives one random history.
type scenario struct {
	t       *testing.T
	c       *Cluster
	rng     *rand.Rand
	next    int
	down    *Coordinator // the coordinator killed or partitioned, if any
	downHow string
	actions []string
}

func runScenario(t *testing.T, seed uint64, steps int) {
	s := &scenario{t: t, c: NewCluster(t, Options{}), rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("seed %d actions:\n\t%s", seed, strings.Join(s.actions, "\n\t"))
		}
	})
	for range 1 + s.rng.IntN(5) {
		s.join()
	}
	s.settle()
	for range steps {
		for range 1 + s.rng.IntN(2) {
			s.step()
		}
		s.settle()
	}
	if s.down != nil {
		s.upCoordinator()
	}
	s.settle()
	h := s.c.Recorder().History()
	var owed time.Duration
	for _, w := range h.Settled {
		owed += w.To - w.From
	}
	s.t.Logf("seed %d: %d intervals, coverage checked over %d settled windows, %v in all",
		seed, len(h.Intervals), len(h.Settled), owed.Round(time.Millisecond))
	s.c.CheckHistory()
}

func (s *scenario) do(what string, f func()) {
	s.actions = append(s.actions, fmt.Sprintf("%v %s", s.c.Now().Round(time.Millisecond), what))
	f()
}

func (s *scenario) settle() {
	s.t.Helper()
	if _, err := s.c.TryWaitSettled(settleWait); err != nil {
		s.t.Fatalf("%v\n%s", err, s.c.describe())
	}
	s.actions = append(s.actions, fmt.Sprintf("%v settled with %d workers", s.c.Now().Round(time.Millisecond), len(s.c.ActiveWorkers())))
	// Stay settled across a renewal or two: coverage is owed, and checked, all along.
	s.c.WaitRenewals(1+s.rng.IntN(2), settleWait)
}

// pick returns a random worker among those keep accepts, or nil.
func (s *scenario) pick(keep func(*Worker) bool) *Worker {
	var cands []*Worker
	for _, w := range s.c.Workers() {
		if keep(w) {
			cands = append(cands, w)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return cands[s.rng.IntN(len(cands))]
}

func (s *scenario) running() int {
	n := 0
	for _, w := range s.c.Workers() {
		if w.Running() {
			n++
		}
	}
	return n
}

func (s *scenario) join() bool {
	if s.running() >= 10 {
		return false
	}
	s.next++
	id := fmt.Sprintf("w%d", s.next)
	s.do("join "+id, func() { s.c.AddWorker(id) })
	return true
}

// newest reports whether w is the latest incarnation of its id.
func (s *scenario) newest(w *Worker) bool {
	var last *Worker
	for _, x := range s.c.Workers() {
		if x.ID == w.ID {
			last = x
		}
	}
	return last == w
}

// step applies one random action, drawing again (a bounded number of times) when the drawn one
// has nothing to act on.
func (s *scenario) step() {
	for range 20 {
		if s.try() {
			return
		}
	}
}

func (s *scenario) try() bool {
	active := func(w *Worker) bool { return w.expectedActive() }
	faulted := func(w *Worker) bool { return w.Running() && !w.expectedActive() && s.newest(w) }
	crashed := func(w *Worker) bool { return !w.Running() && s.newest(w) && w.stopped() }
	switch r := s.rng.IntN(100); {
	case r < 20:
		return s.join()
	case r < 25:
		joined := false
		for range 2 + s.rng.IntN(3) {
			joined = s.join() || joined
		}
		return joined
	case r < 37:
		if w := s.pick(active); w != nil {
			s.do("leave "+w.Holder(), func() {
				if err := w.Leave(); err != nil {
					s.t.Logf("leave %s: %v", w.Holder(), err)
				}
			})
			return true
		}
	case r < 50:
		if w := s.pick(active); w != nil {
			s.do("crash "+w.Holder(), w.Stop)
			return true
		}
	case r < 60:
		if w := s.pick(active); w != nil {
			s.do("cut "+w.Holder(), w.Cut)
			return true
		}
	case r < 70:
		if w := s.pick(active); w != nil {
			s.do("hang "+w.Holder(), w.Hang)
			return true
		}
	case r < 82:
		if w := s.pick(faulted); w != nil {
			s.do("heal "+w.Holder(), w.Heal)
			return true
		}
	case r < 89:
		if w := s.pick(crashed); w != nil {
			s.do("new incarnation of "+w.ID, func() { w.NewIncarnation() })
			return true
		}
	case r < 95:
		// One coordinator at a time is dead or partitioned, so that a quorum remains.
		if s.down == nil {
			s.downCoordinator()
			return true
		}
	default:
		if s.down != nil {
			s.upCoordinator()
			return true
		}
	}
	return false
}

// downCoordinator kills the leader, or partitions (hangs or cuts off) the leader or a follower.
func (s *scenario) downCoordinator() {
	l := s.c.Leader()
	target := l
	if s.rng.IntN(2) == 0 {
		target = s.c.Coordinator((l.Index + 1 + s.rng.IntN(len(s.c.Coordinators())-1)) % len(s.c.Coordinators()))
	}
	switch s.rng.IntN(3) {
	case 0:
		s.do("kill the leader "+l.ID, l.Kill)
		s.down, s.downHow = l, "killed"
	case 1:
		s.do("hang "+target.ID, target.Hang)
		s.down, s.downHow = target, "hung"
	default:
		s.do("cut "+target.ID, target.Cut)
		s.down, s.downHow = target, "cut"
	}
}

// upCoordinator restarts the killed coordinator or heals the partitioned one.
func (s *scenario) upCoordinator() {
	co := s.down
	if s.downHow == "killed" {
		s.do("restart "+co.ID, func() { s.c.Restart(co.Index) })
	} else {
		s.do("heal "+co.ID, co.Heal)
	}
	s.down = nil
}
