package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/benchkit"
)

func main() {
	var e env
	e.flags.Register(flag.CommandLine)
	binary := flag.String("binary", "", "retryring binary (default: build it)")
	limit := flag.Float64("limit", 50, "the ring's rate limit, executions per second (ctl limit --per-second)")
	measure := flag.Duration("measure", 4*time.Minute, "how long the rate is measured from each run's first execution")
	big := flag.Int("big", 12000, "rows of the big instance of the unequal layout")
	small := flag.Int("small", 500, "rows of each small instance of the unequal layout (two per worker)")
	equalRun := flag.Bool("equal", true, "also measure the limit with the same rows spread evenly (5 instances per worker)")
	baseline := flag.Bool("baseline", true, "also drain the unequal layout with no limit (the baseline)")
	trials := flag.Int("trials", 12, "pause trials (0: no pause figure)")
	pauseRows := flag.Int("pause-rows", 12000, "rows pending for the pause trials")
	noRate := flag.Bool("no-rate", false, "skip the rate figure")
	workers := flag.Int("workers", 3, "retry workers")
	flag.IntVar(&e.concurrency, "concurrency", 16, "each worker's --concurrency")
	maxRun := flag.Duration("max-run", 45*time.Minute, "the whole program's bound: every wait ends by then")
	seed := flag.Uint64("seed", 0, "seed of the pause trials' phases (0: from the clock)")
	compare := flag.String("compare", "", "label=binary: run the limited rate runs again with this retryring binary, same run")
	flag.Parse()
	cmpLabel, cmpBinary, _ := strings.Cut(*compare, "=")
	if *compare != "" && (cmpLabel == "" || cmpBinary == "") {
		benchkit.Fail(fmt.Errorf("-compare %q: want label=path-of-a-retryring-binary", *compare))
	}
	if *limit <= 0 || *measure < slice || *workers < 1 || *trials < 0 || *big < 0 || *small < 0 || *pauseRows < 1 {
		benchkit.Fail(fmt.Errorf("want -limit > 0, -measure ≥ %v, -workers ≥ 1, -trials ≥ 0, -big and -small ≥ 0, -pause-rows ≥ 1", slice))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *maxRun)
	defer cancel()
	s, err := e.flags.Connect(ctx)
	if err != nil {
		benchkit.Fail(err)
	}
	defer s.Close()
	e.session = s
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	e.binary = *binary
	if e.binary == "" {
		root, err := proc.ModuleRoot()
		if err != nil {
			benchkit.Fail(err)
		}
		e.binary = filepath.Join(os.TempDir(), "retryring-flow-bench")
		if err := proc.Build(ctx, root, e.binary, false); err != nil {
			benchkit.Fail(err)
		}
	}
	fmt.Printf("timing:    coordinator defaults (TTL %v, renewal %v), worker defaults (execution timeout %v), %d workers at concurrency %d\n",
		10*time.Second, renewal, execTimeout, *workers, e.concurrency)

	if !*noRate {
		un := unequal(*workers, *big, *small)
		runs := []rateRun{}
		if *baseline {
			runs = append(runs, rateRun{layout: un})
		}
		runs = append(runs, rateRun{layout: un, limit: *limit})
		if *equalRun {
			runs = append(runs, rateRun{layout: equal(*workers, un.total(), 5), limit: *limit})
		}
		if *compare != "" {
			for _, r := range runs {
				if r.limit > 0 {
					r.binary, r.label = cmpBinary, cmpLabel
					runs = append(runs, r)
				}
			}
		}
		var rs []rateResult
		for _, r := range runs {
			fmt.Fprintf(os.Stderr, "%s rate run: %s\n", time.Now().UTC().Format("15:04:05"), r.name())
			res, err := e.rate(ctx, r, *limit, *measure)
			if err != nil {
				benchkit.Fail(fmt.Errorf("%s: %w", r.name(), err))
			}
			fmt.Fprintf(os.Stderr, "%s   done, load avg %s\n", time.Now().UTC().Format("15:04:05"), benchkit.LoadAvg())
			rs = append(rs, res)
		}
		printRate(os.Stdout, *limit, *measure, rs)
	}
	if *trials > 0 {
		if *seed == 0 {
			*seed = uint64(time.Now().UnixNano())
		}
		fmt.Fprintf(os.Stderr, "%s pause run: %d trials\n", time.Now().UTC().Format("15:04:05"), *trials)
		res, err := e.pauses(ctx, *trials, *pauseRows, *workers, rand.New(rand.NewPCG(*seed, 0)))
		if err != nil {
			benchkit.Fail(fmt.Errorf("pause: %w", err))
		}
		printPause(os.Stdout, res, *seed)
	}
	fmt.Printf("\nload avg:  %s at the end\n", benchkit.LoadAvg())
}
