package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/procstat"
	"github.com/retryring/retryring/testkit/swarm"
	"github.com/retryring/retryring/wallclock"
	"github.com/retryring/retryring/worker/leaseclient"
)

const (
	// viewTimeout bounds one GET /v1/ring: a coordinator just killed must not hold a poll up.
	viewTimeout = time.Second
	// startBound bounds the start of the coordinators and each restart of one.
	startBound = 2 * time.Minute
	// termWait is how long a SIGTERMed coordinator may take to hand over and exit.
	termWait = 30 * time.Second
	// samplePeriod is how often the leader's RSS is read.
	samplePeriod = 250 * time.Millisecond
)

// result is every figure of one swarm size under one timing.
type result struct {
	workers, rings int
	timing         timingSpec

	joinSettled time.Duration // 0: did not settle
	joinRings   int           // rings settled when the bound ran out
	joinUsage   procstat.Usage

	steadyUsage procstat.Usage
	// steadyEntriesPerMin is how fast the leader's Raft log grew while it only renewed (-1: not
	// measured).
	steadyEntriesPerMin float64
	// steadyReadsPerSec and steadyWritesPerSec are the leader's read(2) and write(2) calls a second
	// while it only renewed (-1: not measured): about one per frame, Raft's besides.
	steadyReadsPerSec, steadyWritesPerSec float64
	agesP50                               time.Duration
	agesP99                               time.Duration
	steadyElement                         int

	kill *faultResult

	rolling []*faultResult

	notes []string
}

func (r *result) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// faultResult is the figures of one fault: a leader kill or one step of the rolling restart.
type faultResult struct {
	coordinator string // the node faulted
	wasLeader   bool
	electedIn   time.Duration // leader kill: until another node reported itself leader
	report      swarm.FaultReport
	counters    swarm.Counters // during [fault, end)
	faultedAddr string
	// from the leader's committed state, before and after
	ringsChanged, membersReassigned int
	settledAgain                    bool
}

// bench is one run: the coordinators, the swarm, and what is measured on them.
type bench struct {
	o      options
	r      *result
	c      *proc.Cluster
	s      *swarm.Swarm
	timing lease.Timing
	// started is when the coordinators had a leader and were all ready.
	started time.Time
}

func runOne(ctx context.Context, o options, dir string, r *result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		return err
	}
	defer g.Close()
	coordArgs := o.coordArgs
	if o.cpuProfiles != "" {
		coordArgs = append(append([]string(nil), coordArgs...), "--profiling")
	}
	var bt *benchTLS
	if r.timing.tls {
		if bt, err = newBenchTLS(dir); err != nil {
			return err
		}
		coordArgs = append(append([]string(nil), coordArgs...), bt.coordArgs...)
	}
	sctx, cancel := context.WithTimeout(ctx, startBound)
	opts := proc.Options{
		Binary: o.binary, Workers: -1, LeaseTTL: r.timing.ttl, LeaseRenewal: r.timing.renewal,
		CoordinatorArgs: coordArgs, ViewTimeout: viewTimeout,
	}
	if bt != nil {
		opts.AdminTLS = bt.admin
	}
	c, err := proc.StartCluster(sctx, g, opts)
	cancel()
	if err != nil {
		return fmt.Errorf("starting the coordinators: %w", err)
	}
	started := time.Now()
	defer c.Close()
	logs, err := os.Create(dir + "/clients.log")
	if err != nil {
		return err
	}
	defer logs.Close()
	sc := swarm.Config{Workers: r.workers, Rings: r.rings, Coordinators: strings.Split(c.RSocketAddrs(), ","), LogWriter: logs}
	sc.Client = func(cfg *leaseclient.Config) {
		cfg.Keepalive = o.keepalive
		cfg.KeepaliveAnswerEvery = o.answerEvery
		if bt != nil {
			cfg.TLS = bt.client
		}
	}
	s, err := swarm.New(sc)
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Close(); err != nil {
			r.note("%v", err)
		}
	}()
	b := &bench{o: o, r: r, c: c, s: s, timing: lease.Timing{TTL: r.timing.ttl, Renewal: r.timing.renewal}.WithDefaults(), started: started}
	if err := b.joinStorm(ctx); err != nil {
		return err
	}
	if err := b.steadyPhase(ctx); err != nil {
		return err
	}
	if err := b.leaderKill(ctx); err != nil {
		return err
	}
	if o.skipRolling {
		return nil
	}
	return b.rollingRestart(ctx)
}

// joinStorm starts every client at once and waits until every ring is settled. A cluster just
// bootstrapped assigns nothing before its holder bound has passed (its workers may hold leases from
// before), so the storm starts after that wait: it measures the storm, not the bootstrap.
func (b *bench) joinStorm(ctx context.Context) error {
	leader, _, err := b.c.Leader(ctx)
	if err != nil {
		return err
	}
	if !wallclock.Sleep(ctx, time.Until(b.started.Add(b.timing.HolderBound()+coordinator.DefaultLeaderLeaseTimeout+time.Second))) {
		return ctx.Err()
	}
	smp := procstat.Sample(leader.Pid(), samplePeriod)
	start := time.Now()
	if err := b.s.Start(ctx); err != nil {
		smp.Finish()
		return err
	}
	settled, rings, why := b.waitSettled(ctx)
	b.r.joinUsage = smp.Finish()
	b.r.joinRings = rings
	if !settled {
		b.r.note("join storm: %d of %d rings settled within %v (%s)", rings, b.r.rings, b.o.settleBound, why)
		return fmt.Errorf("join storm did not settle: %s", why)
	}
	b.r.joinSettled = time.Since(start)
	benchkit.Logf("join storm: every ring settled after %v (leader %s)", b.r.joinSettled.Round(time.Millisecond), b.r.joinUsage)
	return nil
}

// waitSettled polls the leader's view until every ring is settled, within the settle bound. It
// returns how many rings were settled at the last poll, and why not all.
func (b *bench) waitSettled(ctx context.Context) (bool, int, string) {
	ctx, cancel := context.WithTimeout(ctx, b.o.settleBound)
	defer cancel()
	why, rings := "", 0
	for {
		if _, v, err := b.c.Leader(ctx); err != nil {
			why = err.Error()
		} else {
			now := time.Now()
			var ok bool
			if ok, why = b.s.Settled(v, now); ok {
				return true, len(b.s.Rings()), ""
			}
			rings = b.s.SettledRings(v, now)
		}
		if !wallclock.Sleep(ctx, b.o.poll) {
			return false, rings, why
		}
	}
}

// steadyPhase measures the leader while it only renews: no poll of its view meanwhile.
func (b *bench) steadyPhase(ctx context.Context) error {
	leader, _, err := b.c.Leader(ctx)
	if err != nil {
		return err
	}
	index0, indexErr := raftCommitIndex(ctx, leader)
	from := time.Now()
	calls0, callsErr := procstat.ReadSyscalls(leader.Pid())
	smp := procstat.Sample(leader.Pid(), samplePeriod)
	profiled := b.profileSteady(ctx, leader)
	if !wallclock.Sleep(ctx, b.o.steady) {
		smp.Finish()
		return ctx.Err()
	}
	b.r.steadyUsage = smp.Finish()
	b.r.steadyReadsPerSec, b.r.steadyWritesPerSec = -1, -1
	if callsErr == nil {
		calls1, err := procstat.ReadSyscalls(leader.Pid())
		callsErr = err
		if err == nil {
			secs := time.Since(from).Seconds()
			b.r.steadyReadsPerSec = float64(calls1.Reads-calls0.Reads) / secs
			b.r.steadyWritesPerSec = float64(calls1.Writes-calls0.Writes) / secs
		}
	}
	if callsErr != nil {
		b.r.note("steady: the leader's system calls not counted: %v", callsErr)
	}
	if err := <-profiled; err != nil {
		b.r.note("steady: no CPU profile of the leader: %v", err)
	}
	b.r.steadyEntriesPerMin = -1
	if indexErr == nil {
		index1, err := raftCommitIndex(ctx, leader)
		indexErr = err
		if err == nil {
			b.r.steadyEntriesPerMin = float64(index1-index0) / time.Since(from).Minutes()
		}
	}
	if indexErr != nil {
		b.r.note("steady: Raft log growth not measured: %v", indexErr)
	}
	ages := b.s.History().Ages(from, time.Now())
	b.r.agesP50, b.r.agesP99, b.r.steadyElement = swarm.Percentile(ages, 0.5), swarm.Percentile(ages, 0.99), len(ages)
	benchkit.Logf("steady: leader %s, %.0f read(2)/s %.0f write(2)/s, lease age at receipt p50 %v p99 %v over %d elements, Raft log %.0f entries/min",
		b.r.steadyUsage, b.r.steadyReadsPerSec, b.r.steadyWritesPerSec,
		b.r.agesP50.Round(time.Millisecond), b.r.agesP99.Round(time.Millisecond), len(ages), b.r.steadyEntriesPerMin)
	return nil
}

// leaderKill kills the leader with SIGKILL, measures, then brings it back.
func (b *bench) leaderKill(ctx context.Context) error {
	leader, v, err := b.c.Leader(ctx)
	if err != nil {
		return err
	}
	before := assignments(v, b.s.Rings())
	f := &faultResult{coordinator: leader.ID, wasLeader: true, faultedAddr: leader.RSocketAddr}
	b.r.kill = f
	c0 := b.s.Counters()
	at := time.Now()
	if err := leader.Kill9(); err != nil {
		return err
	}
	elected, err := b.waitNewLeader(ctx, leader)
	if err != nil {
		return err
	}
	f.electedIn = elected.Sub(at)
	benchkit.Logf("leader %s killed; a new leader after %v", leader.ID, f.electedIn.Round(time.Millisecond))
	b.observe(ctx, f, at, elected, before, c0)
	if err := b.bringBack(ctx, leader); err != nil {
		return err
	}
	return nil
}

// rollingRestart restarts every coordinator by SIGTERM, one at a time, highest index first (as a
// StatefulSet rolls), waiting after each until every node is ready and every ring settled.
func (b *bench) rollingRestart(ctx context.Context) error {
	cos := b.c.Coordinators()
	for i := len(cos) - 1; i >= 0; i-- {
		co := cos[i]
		leader, v, err := b.c.Leader(ctx)
		if err != nil {
			return err
		}
		f := &faultResult{coordinator: co.ID, wasLeader: leader == co, faultedAddr: co.RSocketAddr}
		b.r.rolling = append(b.r.rolling, f)
		before := assignments(v, b.s.Rings())
		c0 := b.s.Counters()
		at := time.Now()
		if err := co.Term(termWait); err != nil {
			b.r.note("rolling restart: %s: %v", co.ID, err)
		}
		elected := at
		if f.wasLeader {
			if elected, err = b.waitNewLeader(ctx, co); err != nil {
				return err
			}
			f.electedIn = elected.Sub(at)
		}
		if err := b.bringBack(ctx, co); err != nil {
			return err
		}
		b.observe(ctx, f, at, elected, before, c0)
		benchkit.Logf("rolling restart: %s (leader %t) done", co.ID, f.wasLeader)
	}
	return nil
}

// waitNewLeader polls until a node other than old reports itself leader.
func (b *bench) waitNewLeader(ctx context.Context, old *proc.Coordinator) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.settleBound)
	defer cancel()
	for {
		if l, _, err := b.c.Leader(ctx); err == nil && l != old {
			return time.Now(), nil
		}
		if !wallclock.Sleep(ctx, 20*time.Millisecond) {
			return time.Time{}, fmt.Errorf("no new leader after %s within %v", old.ID, b.o.settleBound)
		}
	}
}

// observe waits until every worker was renewed by a coordinator other than the faulted one, then
// until the new leader has had time to decide about members that did not come back (its reconnect
// grace past a silence timeout, and the holder bound after which it may move ranges), then until
// every ring is settled; and reads the figures of [at, then).
func (b *bench) observe(ctx context.Context, f *faultResult, at, elected time.Time, before map[string]member, c0 swarm.Counters) {
	deadline := time.Now().Add(b.o.renewBound)
	for time.Now().Before(deadline) && ctx.Err() == nil && !b.allRenewed(at, f.faultedAddr) {
		time.Sleep(50 * time.Millisecond)
	}
	decided := elected.Add(coordinator.DefaultReconnectGrace + coordinator.DefaultSilenceTimeout + b.timing.HolderBound())
	for time.Now().Before(decided) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	var why string
	f.settledAgain, _, why = b.waitSettled(ctx)
	if !f.settledAgain {
		b.r.note("after the fault of %s: not settled again within %v (%s)", f.coordinator, b.o.settleBound, why)
	}
	end := time.Now()
	f.report = b.s.History().Fault(at, end, f.faultedAddr)
	f.counters = b.s.Counters().Sub(c0)
	if _, v, err := b.c.Leader(ctx); err == nil {
		f.ringsChanged, f.membersReassigned = compare(before, assignments(v, b.s.Rings()))
	}
	rep := f.report
	benchkit.Logf("fault of %s: %d of %d ran out before another node's first element (longest lapse %v); renewed p50 %v max %v, %d not; %d rings changed, %d members reassigned; %d overlaps",
		f.coordinator, rep.RanOut, rep.Members, rep.LongestLapse.Round(time.Millisecond),
		swarm.Percentile(rep.Renewed, 0.5).Round(time.Millisecond), swarm.Percentile(rep.Renewed, 1).Round(time.Millisecond),
		rep.NotRenewed, f.ringsChanged, f.membersReassigned, len(rep.Overlaps))
}

func (b *bench) allRenewed(at time.Time, faulted string) bool {
	for _, m := range b.s.History().Members {
		ok := false
		for k := len(m.Installs) - 1; k >= 0 && m.Installs[k].At.After(at); k-- {
			if m.Installs[k].Coordinator != faulted {
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

// bringBack restarts a stopped coordinator and waits until every node is ready.
func (b *bench) bringBack(ctx context.Context, co *proc.Coordinator) error {
	ctx, cancel := context.WithTimeout(ctx, startBound)
	defer cancel()
	if err := b.c.RestartCoordinator(ctx, co); err != nil {
		return fmt.Errorf("restarting %s: %w", co.ID, err)
	}
	for _, other := range b.c.Coordinators() {
		if err := other.WaitReady(ctx); err != nil {
			return fmt.Errorf("%s not ready after the restart of %s: %w", other.ID, co.ID, err)
		}
	}
	return nil
}

// member is one member's committed assignment, with its ring's generation.
type member struct {
	epoch, generation uint64
	state             string
}

func assignments(v admin.RingView, rings []lease.RingKey) map[string]member {
	out := map[string]member{}
	for _, k := range rings {
		r, ok := v.Ring(k)
		if !ok {
			continue
		}
		for _, m := range r.Members {
			out[k.String()+"/"+m.WorkerID] = member{epoch: m.Epoch, generation: r.Generation, state: m.State}
		}
	}
	return out
}

// compare counts the rings whose generation moved and the members whose epoch changed (or that
// are gone) between two committed states.
func compare(before, after map[string]member) (rings, members int) {
	changed := map[string]bool{}
	for k, b := range before {
		a, ok := after[k]
		ring := k[:strings.LastIndexByte(k, '/')]
		if !ok || a.generation != b.generation {
			changed[ring] = true
		}
		if !ok || a.epoch != b.epoch {
			members++
		}
	}
	return len(changed), members
}

// profileSteady fetches the leader's CPU profile over the steady phase (less a second, so that it
// ends within it) into the -cpu-profiles directory; the channel answers when it is written.
func (b *bench) profileSteady(ctx context.Context, leader *proc.Coordinator) <-chan error {
	done := make(chan error, 1)
	if b.o.cpuProfiles == "" {
		done <- nil
		return done
	}
	if b.r.timing.tls {
		done <- errors.New("not taken in a TLS run")
		return done
	}
	seconds := max(int(b.o.steady.Seconds())-1, 1)
	path := filepath.Join(b.o.cpuProfiles, fmt.Sprintf("leader-%d-%s.pprof", b.r.workers, b.r.timing.name))
	go func() {
		err := fetchProfile(ctx, leader.URL(fmt.Sprintf("%sprofile?seconds=%d", admin.PathProfiles, seconds)), path, time.Duration(seconds+10)*time.Second)
		if err == nil {
			benchkit.Logf("steady: the leader's CPU profile over %d s in %s (go tool pprof -top %s)", seconds, path, path)
		}
		done <- err
	}()
	return done
}

func fetchProfile(ctx context.Context, url, path string, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
