// Command stepdown measures what `retryring ctl step-down` costs the workers: 3 `retryring
// coordinator` processes on loopback (internal/proc) and N real lease clients in this process
// (testkit/swarm), every ring settled; then -trials times, `retryring ctl step-down` (the real
// CLI, sent to a follower, which forwards it to the leader) and, per trial: the CLI's wall time,
// the handover time the old leader reports (transfer until it sees the new leader), how long until
// every worker got an element from another coordinator than the old leader (p50, max), how many
// workers had a lapse of their lease cover (goal: none) and the longest, assignments changed and
// overlaps. As the same-run baseline, one kill -9 of the leader (a failover by election) is
// measured the same way at the end.
//
// It prints a markdown table with the command, the machine, the date and the load average. It
// never asserts on a timing; every wait is bounded.
//
//	go run ./bench/stepdown                         # 30 workers in 3 rings, 5 trials
//	go run ./bench/stepdown -workers 100 -trials 10
package main

import (
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/wallclock"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/swarm"
)

type options struct {
	workers, rings, trials int
	ttl, renewal, gap      time.Duration
	bound, maxRun          time.Duration
	binary                 string
	keep                   bool
}

// trial is one handover.
type trial struct {
	kind          string // "step-down" or "kill -9"
	from, to      string
	cliWall       time.Duration // the ctl command, start to exit (step-down only)
	handover      time.Duration // as the old leader reports it (step-down) or until a new leader answered (kill)
	report        swarm.FaultReport
	assignChanged int
}

func main() {
	var o options
	flag.IntVar(&o.workers, "workers", 30, "lease clients")
	flag.IntVar(&o.rings, "rings", 3, "rings (worker i joins ring i mod rings)")
	flag.IntVar(&o.trials, "trials", 5, "step-downs")
	flag.DurationVar(&o.ttl, "ttl", lease.DefaultTTL, "lease TTL")
	flag.DurationVar(&o.renewal, "renewal", lease.DefaultRenewal, "lease renewal")
	flag.DurationVar(&o.gap, "gap", 3*time.Second, "quiet time between trials")
	flag.DurationVar(&o.bound, "bound", 60*time.Second, "bound on every wait")
	flag.DurationVar(&o.maxRun, "max-run", 10*time.Minute, "bound on the whole run")
	flag.StringVar(&o.binary, "binary", "", "retryring binary (default: build ./cmd/retryring)")
	flag.BoolVar(&o.keep, "keep", false, "keep the run directory (logs, Raft data)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxRun)
	defer cancel()
	if err := run(ctx, o); err != nil {
		benchkit.Logf("stepdown: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	m := benchkit.StartRun()
	dir, done, err := benchkit.TempDir("stepdown-", o.keep, benchkit.Logf)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	if o.binary, err = benchkit.Binary(ctx, o.binary, dir, benchkit.Logf); err != nil {
		return err
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		return err
	}
	defer g.Close()
	sctx, scancel := context.WithTimeout(ctx, o.bound)
	c, err := proc.StartCluster(sctx, g, proc.Options{Binary: o.binary, Workers: -1, LeaseTTL: o.ttl, LeaseRenewal: o.renewal, ViewTimeout: 2 * time.Second})
	scancel()
	if err != nil {
		return fmt.Errorf("starting the coordinators: %w", err)
	}
	defer c.Close()
	timing := lease.Timing{TTL: o.ttl, Renewal: o.renewal}.WithDefaults()
	// A cluster just bootstrapped assigns nothing before every lease of before may have ended.
	wallclock.Sleep(ctx, timing.HolderBound()+coordinator.DefaultLeaderLeaseTimeout+time.Second)
	logs, err := os.Create(filepath.Join(dir, "clients.log"))
	if err != nil {
		return err
	}
	defer logs.Close()
	s, err := swarm.New(swarm.Config{Workers: o.workers, Rings: o.rings, Coordinators: strings.Split(c.RSocketAddrs(), ","), LogWriter: logs})
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()
	if err := waitSettled(ctx, c, s, o.bound); err != nil {
		return err
	}
	benchkit.Logf("%d workers in %d rings settled", o.workers, o.rings)

	var trials []trial
	for i := range o.trials {
		wallclock.Sleep(ctx, o.gap)
		t, err := stepDown(ctx, o, c, s, timing)
		if err != nil {
			return fmt.Errorf("trial %d: %w", i+1, err)
		}
		benchkit.Logf("step-down %s → %s: cli %v, handover %v, %d lapsed (longest %v), renewed max %v, %d overlaps",
			t.from, t.to, t.cliWall.Round(time.Millisecond), t.handover.Round(time.Millisecond), t.report.Lapsed,
			t.report.LongestLapse.Round(time.Millisecond), swarm.Percentile(t.report.Renewed, 1).Round(time.Millisecond), len(t.report.Overlaps))
		trials = append(trials, t)
	}
	wallclock.Sleep(ctx, o.gap)
	k, err := killLeader(ctx, o, c, s, timing)
	if err != nil {
		return fmt.Errorf("baseline kill: %w", err)
	}
	trials = append(trials, k)
	m.LoadEnd = benchkit.LoadAvg()
	fmt.Print(render(m, o, trials))
	return nil
}

func waitSettled(ctx context.Context, c *proc.Cluster, s *swarm.Swarm, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	why := "no leader"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, v, err := c.Leader(ctx); err == nil {
			var ok bool
			if ok, why = s.Settled(v, time.Now()); ok {
				return nil
			}
		}
		wallclock.Sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("not settled within %v: %s", bound, why)
}

// epochs are the members' current epochs in the leader's view, by worker id.
func epochs(v admin.RingView) map[string]uint64 {
	out := map[string]uint64{}
	for _, r := range v.Rings {
		for _, m := range r.Members {
			out[r.Region+"/"+r.Cluster+"/"+r.Service+"/"+m.WorkerID] = m.Epoch
		}
	}
	return out
}

func changed(a, b map[string]uint64) int {
	n := 0
	for k, e := range a {
		if b[k] != e {
			n++
		}
	}
	return n
}

// stepDown runs `retryring ctl step-down` against a follower and observes the workers until every
// one was renewed by another coordinator and a few renewals more.
func stepDown(ctx context.Context, o options, c *proc.Cluster, s *swarm.Swarm, timing lease.Timing) (trial, error) {
	leader, v, err := c.Leader(ctx)
	if err != nil {
		return trial{}, err
	}
	var follower *proc.Coordinator
	for _, co := range c.Coordinators() {
		if co != leader {
			follower = co
			break
		}
	}
	t := trial{kind: "step-down", from: leader.ID}
	before := epochs(v)
	at := time.Now()
	cctx, cancel := context.WithTimeout(ctx, o.bound)
	out, err := exec.CommandContext(cctx, o.binary, "ctl", "step-down", "--coordinator", "http://"+follower.HTTPAddr, "-o", "json").Output()
	cancel()
	t.cliWall = time.Since(at)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return t, fmt.Errorf("ctl step-down: %s", strings.TrimSpace(string(ee.Stderr)))
		}
		return t, err
	}
	var ans admin.StepDownAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return t, fmt.Errorf("ctl step-down answered %q: %w", out, err)
	}
	t.to, t.handover = ans.LeaderID, time.Duration(ans.TookMs)*time.Millisecond
	return observe(ctx, o, c, s, timing, t, at, leader.RSocketAddr, before)
}

// killLeader is the baseline: kill -9 of the leader, a failover by election; the node comes back.
func killLeader(ctx context.Context, o options, c *proc.Cluster, s *swarm.Swarm, timing lease.Timing) (trial, error) {
	leader, v, err := c.Leader(ctx)
	if err != nil {
		return trial{}, err
	}
	t := trial{kind: "kill -9 (baseline)", from: leader.ID}
	before := epochs(v)
	at := time.Now()
	if err := leader.Kill9(); err != nil {
		return t, err
	}
	deadline := time.Now().Add(o.bound)
	for {
		if l, _, err := c.Leader(ctx); err == nil && l != leader {
			t.to, t.handover = l.ID, time.Since(at)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return t, fmt.Errorf("no new leader within %v", o.bound)
		}
		wallclock.Sleep(ctx, 10*time.Millisecond)
	}
	t, err = observe(ctx, o, c, s, timing, t, at, leader.RSocketAddr, before)
	if err != nil {
		return t, err
	}
	rctx, cancel := context.WithTimeout(ctx, o.bound)
	defer cancel()
	return t, c.RestartCoordinator(rctx, leader)
}

func observe(ctx context.Context, o options, c *proc.Cluster, s *swarm.Swarm, timing lease.Timing, t trial, at time.Time,
	oldAddr string, before map[string]uint64) (trial, error) {
	deadline := time.Now().Add(o.bound)
	for !allRenewed(s, at, oldAddr) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return t, fmt.Errorf("not every worker was renewed by another coordinator within %v", o.bound)
		}
		wallclock.Sleep(ctx, 20*time.Millisecond)
	}
	// A few renewals more, so that a lapse that follows the first renewal would show.
	wallclock.Sleep(ctx, 3*timing.Renewal)
	t.report = s.History().Fault(at, time.Now(), oldAddr)
	if _, v, err := c.Leader(ctx); err == nil {
		t.assignChanged = changed(before, epochs(v))
	}
	return t, nil
}

func allRenewed(s *swarm.Swarm, at time.Time, old string) bool {
	for _, m := range s.History().Members {
		ok := false
		for k := len(m.Installs) - 1; k >= 0 && m.Installs[k].At.After(at); k-- {
			if m.Installs[k].Coordinator != old {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func render(m benchkit.Run, o options, trials []trial) string {
	var b strings.Builder
	m.Machine.Print(&b, m.Command)
	fmt.Fprintf(&b, "load avg:  %s at the end\n", m.LoadEnd)
	fmt.Fprintf(&b, "setup:     3 coordinators (processes), %d lease clients in %d rings, TTL %v, renewal %v\n\n", o.workers, o.rings, o.ttl, o.renewal)
	fmt.Fprintln(&b, "| # | handover | from → to | ctl wall time | handover (old leader's view) | all renewed by another node, p50 / max | workers with a lapse | longest lapse | leases run out | assignments changed | overlaps |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|")
	var hand []time.Duration
	for i, t := range trials {
		cli := "-"
		if t.cliWall > 0 {
			cli = ms(t.cliWall)
			hand = append(hand, t.handover)
		}
		r := t.report
		fmt.Fprintf(&b, "| %d | %s | %s → %s | %s | %s | %s / %s | %d of %d | %s | %d | %d | %d |\n", i+1, t.kind, t.from, t.to, cli, ms(t.handover),
			ms(swarm.Percentile(r.Renewed, 0.5)), ms(swarm.Percentile(r.Renewed, 1)), r.Lapsed, r.Members, ms(r.LongestLapse), r.RanOut, t.assignChanged, len(r.Overlaps))
	}
	sort.Slice(hand, func(i, j int) bool { return hand[i] < hand[j] })
	if len(hand) > 0 {
		fmt.Fprintf(&b, "\nstep-down handover over %d trials: median %s, max %s\n", len(hand), ms(swarm.Percentile(hand, 0.5)), ms(swarm.Percentile(hand, 1)))
	}
	return b.String()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
