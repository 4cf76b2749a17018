package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
)

// ring is the one ring every probe joins.
var ring = lease.RingKey{Region: "bench", Cluster: "c1", Service: "orders"}

type options struct {
	trials          int
	probes          int
	coordinators    int
	figures         map[string]bool
	baselineClients int
	baselineBound   time.Duration
	retryring       string
	timings         []timingSpec
	silence         time.Duration
	probeBackoffMax time.Duration
	poll            time.Duration
	maxRun          time.Duration
	keep            bool
	out             string
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == baselineClientFlag {
		os.Exit(runBaselineClient(os.Args[2], os.Args[3]))
	}
	var o options
	var figures, timings string
	var ttl, renewal time.Duration
	fs := flag.NewFlagSet("ringbench", flag.ExitOnError)
	fs.IntVar(&o.trials, "trials", 20, "trials per figure")
	fs.IntVar(&o.probes, "probes", 8, "lease-only worker processes (bench/leaseprobe)")
	fs.IntVar(&o.coordinators, "coordinators", 3, "coordinator processes (Raft voters)")
	fs.StringVar(&figures, "figures", "stop,kill,leave,leader", "trial kinds to run: stop (SIGSTOP detection), kill (kill -9 detection and takeover), leave, leader (leader kill)")
	fs.IntVar(&o.baselineClients, "baseline-clients", 5, "SIGSTOPped clients of the plain rsocket-go server, run in parallel with the trials (0: no baseline)")
	fs.DurationVar(&o.baselineBound, "baseline-bound", 150*time.Second, "how long the baseline waits for the server to notice a stopped client")
	fs.StringVar(&o.retryring, "retryring", "", "retryring binary (default: build ./cmd/retryring of this module)")
	fs.DurationVar(&ttl, "lease-ttl", 0, "coordinators' --lease-ttl (0: their default), when -timing is not given")
	fs.DurationVar(&renewal, "lease-renewal", 0, "coordinators' --lease-renewal (0: their default), when -timing is not given")
	fs.StringVar(&timings, "timing", "", "lease timings to measure one after the other, each on a cluster of its own: old (TTL 3s, renewal 1s), new (the defaults), NAME=TTL/RENEWAL; e.g. old,new")
	fs.DurationVar(&o.silence, "silence-timeout", 0, "coordinators' --silence-timeout (0: their default)")
	fs.DurationVar(&o.probeBackoffMax, "probe-backoff-max", 0, "the probes' lease client Backoff.Max (0: its default, leaseclient.DefaultBackoffMax)")
	fs.DurationVar(&o.poll, "poll", 10*time.Millisecond, "period of every poll of /v1/ring and of the probes' event streams")
	fs.DurationVar(&o.maxRun, "max-run", 20*time.Minute, "stop the run after this long")
	fs.BoolVar(&o.keep, "keep", false, "keep the logs and data directories")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	_ = fs.Parse(os.Args[1:])
	o.figures = map[string]bool{}
	for _, f := range strings.Split(figures, ",") {
		switch f = strings.TrimSpace(f); f {
		case "stop", "kill", "leave", "leader":
			o.figures[f] = true
		case "":
		default:
			benchkit.Fail(fmt.Errorf("-figures: unknown %q", f))
		}
	}
	var err error
	if o.timings, err = parseTimings(timings, ttl, renewal); err != nil {
		benchkit.Fail(err)
	}
	if o.trials < 1 || o.probes < 2 || o.coordinators < 3 {
		benchkit.Fail(fmt.Errorf("need -trials ≥ 1, -probes ≥ 2 (a takeover needs a survivor), -coordinators ≥ 3 (a leader kill needs a quorum left)"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxRun)
	defer cancel()
	if err := run(ctx, o); err != nil {
		benchkit.Fail(err)
	}
}

func run(ctx context.Context, o options) (err error) {
	m := benchkit.StartRun()
	dir, done, err := benchkit.TempDir("ringbench-", o.keep, benchkit.Logf)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	bins, err := build(ctx, dir, o.retryring)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	var baseDone chan baselineResult
	if o.baselineClients > 0 {
		baseDone = make(chan baselineResult, 1)
		b := &baseline{dir: dir, self: self, clients: o.baselineClients, bound: o.baselineBound}
		go func() { baseDone <- b.run(ctx) }()
	}

	var runs []timingRun
	var trialErr error
	for _, spec := range o.timings {
		benchkit.Logf("timing %s", spec)
		res, err := runTiming(ctx, o, spec, dir, bins)
		if err != nil {
			trialErr = fmt.Errorf("timing %s: %w", spec.name, err)
			benchkit.Logf("%v", trialErr)
		}
		if res != nil {
			runs = append(runs, timingRun{spec: spec, res: res})
		}
		if err != nil {
			break
		}
	}

	base := newResults()
	if baseDone != nil {
		benchkit.Logf("waiting for the baseline")
		b := <-baseDone
		if b.err != nil {
			base.note("baseline failed: %v", b.err)
		}
		for _, v := range b.vals {
			base.add(figBaseline, v)
		}
		base.timeouts[figBaseline] += b.timeouts
	}
	m.LoadEnd = benchkit.LoadAvg()
	report := renderReport(m, o, runs, base)
	fmt.Print(report)
	if o.out != "" {
		if werr := os.WriteFile(o.out, []byte(report), 0o644); werr != nil {
			return werr
		}
	}
	return trialErr
}

// timingRun is the results of one timing.
type timingRun struct {
	spec timingSpec
	res  *results
}

// runTiming starts a cluster of coordinators on spec's timing and the probes, in a process group
// of its own under dir, runs every figure's trials on it and stops it. Results come back even
// when the trials stopped early (with the error), so that what was measured is reported.
func runTiming(ctx context.Context, o options, spec timingSpec, dir string, bins binaries) (*results, error) {
	sub, err := os.MkdirTemp(dir, spec.name+"-")
	if err != nil {
		return nil, err
	}
	g, err := proc.GroupIn(sub)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Minute)
	defer scancel()
	pc, err := proc.StartCluster(sctx, g, proc.Options{
		Binary: bins.retryring, Coordinators: o.coordinators, Workers: -1, Ring: ring,
		LeaseTTL: spec.t.TTL, LeaseRenewal: spec.t.Renewal, CoordinatorArgs: coordArgs(o), ViewTimeout: viewTimeout,
	})
	if err != nil {
		return nil, err
	}
	c := &cluster{Cluster: pc, probeBin: bins.probe, probeArgs: probeArgs(o)}
	defer c.Close()
	for range o.probes {
		if _, err := c.addProbe(sctx); err != nil {
			return nil, err
		}
	}
	if err := c.waitSettled(ctx, settleBound); err != nil {
		return nil, err
	}
	benchkit.Logf("%d coordinators and %d probes settled", o.coordinators, o.probes)

	res := newResults()
	r := &runner{c: c, res: res, poll: o.poll, renewal: spec.t.Renewal, log: benchkit.Logf}
	err = runTrials(ctx, r, o)
	if err != nil {
		benchkit.Logf("trials stopped: %v", err)
	}
	return res, err
}

// runTrials runs every figure's trials, one kind after the other.
func runTrials(ctx context.Context, r *runner, o options) error {
	kinds := []struct {
		name string
		run  func(context.Context, int) error
	}{
		{"stop", func(ctx context.Context, i int) error { return r.detect(ctx, i, false) }},
		{"kill", func(ctx context.Context, i int) error { return r.detect(ctx, i, true) }},
		{"leave", r.leave},
		{"leader", r.leaderKill},
	}
	for _, k := range kinds {
		if !o.figures[k.name] {
			continue
		}
		for i := range o.trials {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := k.run(ctx, i); err != nil {
				return fmt.Errorf("%s trial %d: %w", k.name, i+1, err)
			}
		}
	}
	return nil
}

// coordArgs are the flags every coordinator gets beyond its addresses and lease timing.
func coordArgs(o options) []string {
	if o.silence > 0 {
		return []string{"--silence-timeout", o.silence.String()}
	}
	return nil
}

// probeArgs are the flags every probe gets beyond its id, ring and coordinators.
func probeArgs(o options) []string {
	if o.probeBackoffMax > 0 {
		return []string{"-backoff-max", o.probeBackoffMax.String()}
	}
	return nil
}

// silenceTimeout is the coordinators' silence timeout.
func silenceTimeout(o options) time.Duration {
	if o.silence > 0 {
		return o.silence
	}
	return coordinator.DefaultSilenceTimeout
}

type binaries struct{ retryring, probe string }

// build compiles the retryring binary (unless given) and the lease probe into dir.
func build(ctx context.Context, dir, retryring string) (binaries, error) {
	root, err := proc.ModuleRoot()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{retryring: retryring, probe: filepath.Join(dir, "leaseprobe")}
	if b.retryring == "" {
		b.retryring = filepath.Join(dir, "retryring")
		if err := proc.Build(ctx, root, b.retryring, false); err != nil {
			return binaries{}, err
		}
	}
	if err := proc.BuildPackage(ctx, root, "./bench/leaseprobe", b.probe, false); err != nil {
		return binaries{}, err
	}
	return b, nil
}
