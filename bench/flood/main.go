package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	rslogger "github.com/rsocket/rsocket-go/logger"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/coordinator/auth"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/flood"
	"github.com/retryring/retryring/testkit/procstat"
	"github.com/retryring/retryring/worker/leaseclient"
)

type options struct {
	binary          string
	phase           time.Duration
	garbage, setups int
	keep            bool
}

// token is the one valid worker token of the run (any string CheckToken accepts).
const token = "bench-flood-token-000000000000001"

var ring = lease.RingKey{Region: "bench", Cluster: "c1", Service: "flood"}

func main() {
	var o options
	var seconds int
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	fs.StringVar(&o.binary, "binary", "", "retryring binary to run as coordinators (default: build ./cmd/retryring of this module)")
	fs.IntVar(&seconds, "seconds", 30, "length of each phase (quiet, then flooded)")
	fs.IntVar(&o.garbage, "garbage", 500, "garbage connections per second")
	fs.IntVar(&o.setups, "setups", 200, "SETUPs without a valid token per second")
	fs.BoolVar(&o.keep, "keep", false, "keep the logs and data directory")
	_ = fs.Parse(os.Args[1:])
	o.phase = time.Duration(seconds) * time.Second
	rslogger.SetLevel(rslogger.LevelError + 1)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		benchkit.Fail(err)
	}
}

// phaseResult is one phase at the leader.
type phaseResult struct {
	name    string
	usage   procstat.Usage
	longest []time.Duration
	lapses  []int
	stats   *flood.Stats
}

func run(ctx context.Context, o options) (err error) {
	m := benchkit.StartRun()
	dir, done, err := benchkit.TempDir("flood-", o.keep, benchkit.Logf)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	if o.binary, err = benchkit.Binary(ctx, o.binary, dir, benchkit.Logf); err != nil {
		return err
	}
	tokens := filepath.Join(dir, "workers.yaml")
	secret := filepath.Join(dir, "secret")
	line := fmt.Sprintf("- {ring: %q, hash: %q}\n", ring.String(), auth.HashToken(token))
	if err := errors.Join(os.WriteFile(tokens, []byte(line), 0o600),
		os.WriteFile(secret, []byte("bench-flood-cluster-secret-000001\n"), 0o600)); err != nil {
		return err
	}
	g, err := proc.GroupIn(filepath.Join(dir, "procs"))
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := proc.StartCluster(startCtx, g, proc.Options{Binary: o.binary, Workers: -1, CoordinatorArgs: []string{
		"--worker-tokens", tokens, "--cluster-secret-file", secret,
		"--max-connections", "4096", "--max-setups-per-second", "1000", "--max-streams-per-ring", "64"}})
	if err != nil {
		_ = g.Close()
		return err
	}
	defer c.Close()
	leader, _, err := c.Leader(startCtx)
	if err != nil {
		return err
	}
	benchkit.Logf("leader %s (pid %d)", leader.ID, leader.Process.Pid())

	var holds []func() bool
	for _, id := range []string{"w1", "w2"} {
		cl, err := leaseclient.New(leaseclient.Config{WorkerID: id, Ring: ring, Token: token,
			Coordinators: strings.Split(c.RSocketAddrs(), ",")})
		if err != nil {
			return err
		}
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		go func() { _ = cl.Run(wctx) }()
		holds = append(holds, func() bool { _, err := cl.Guard().Check(0); return err == nil })
	}
	for !holds[0]() || !holds[1]() {
		if startCtx.Err() != nil {
			return fmt.Errorf("the two workers got no lease within the start bound")
		}
		time.Sleep(50 * time.Millisecond)
	}
	benchkit.Logf("both workers hold a lease")

	var results []phaseResult
	for _, flooded := range []bool{false, true} {
		r := phaseResult{name: "quiet"}
		if flooded {
			r.name = fmt.Sprintf("flood: %d garbage connections + %d bad SETUPs per second", o.garbage, o.setups)
		}
		benchkit.Logf("phase %s, %v", r.name, o.phase)
		cover := flood.WatchCover(5*time.Millisecond, holds...)
		smp := procstat.Sample(leader.Process.Pid(), 250*time.Millisecond)
		pctx, pcancel := context.WithTimeout(ctx, o.phase)
		if flooded {
			st := flood.Run(pctx, flood.Config{Addrs: []string{leader.RSocketAddr}, GarbagePerSecond: o.garbage,
				SetupsPerSecond: o.setups, Ring: ring, WorkerIDs: []string{"w1", "w2"}})
			r.stats = &st
		} else {
			<-pctx.Done()
		}
		pcancel()
		r.usage = smp.Finish()
		r.longest, r.lapses = cover.Stop()
		results = append(results, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	refusals, err := leaderRefusals(ctx, leader)
	if err != nil {
		return err
	}
	held := holds[0]() && holds[1]()
	m.LoadEnd = benchkit.LoadAvg()
	report(m, o, results, refusals, held)
	if !held {
		return errors.New("a worker did not hold its lease at the end")
	}
	return nil
}

// leaderRefusals reads retryring_coordinator_refusals_total by reason from the leader.
func leaderRefusals(ctx context.Context, co *proc.Coordinator) (map[string]float64, error) {
	body, err := httpGet(ctx, co.URL(admin.PathMetrics))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for series, v := range proc.ParseMetrics(body) {
		if r, ok := strings.CutPrefix(series, `retryring_coordinator_refusals_total{reason="`); ok {
			out[strings.TrimSuffix(r, `"}`)] = v
		}
	}
	return out, nil
}

func report(m benchkit.Run, o options, rs []phaseResult, refusals map[string]float64, held bool) {
	fmt.Printf("command:   %s\n", m.Command)
	fmt.Printf("date:      %s\n", m.When.Format(time.RFC3339))
	fmt.Printf("machine:   %d CPUs (%s), %s RAM, kernel %s, %s\n", m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go)
	fmt.Printf("load avg:  %s at the start, %s at the end\n\n", m.LoadAvgFrom, m.LoadEnd)
	fmt.Printf("| phase (%v each, at the leader) | longest lapse of cover w1 / w2 (lapses) | leader CPU (one core) | leader peak RSS |\n|---|---|---|---|\n", o.phase)
	for _, r := range rs {
		fmt.Printf("| %s | %v / %v (%d / %d) | %.1f %% | %.0f MB |\n", r.name, r.longest[0], r.longest[1], r.lapses[0], r.lapses[1], r.usage.CPUPercent, r.usage.PeakRSSMiB)
	}
	for _, r := range rs {
		if st := r.stats; st != nil {
			fmt.Printf("\nflood sent: %d garbage connections, %d bad SETUPs; answers to the SETUPs: %s; lease elements to them: %d; closed unanswered: %d; dial errors: %d; skipped (flood side at its cap): %d\n",
				st.Garbage, st.Setups, sorted(toFloat(st.Refused)), st.Accepted, st.Closed, st.DialErrors, st.Skipped)
		}
	}
	fmt.Printf("leader refusals (retryring_coordinator_refusals_total): %s\n", sorted(refusals))
	fmt.Printf("both workers hold their lease at the end: %v\n", held)
}

func toFloat(m map[string]int64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

func sorted(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+strconv.FormatFloat(m[k], 'f', 0, 64))
	}
	return strings.Join(parts, ", ")
}
