package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryring/retryring/bench/internal/benchkit"
	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/worker"
)

type variant struct{ name, flags string }

type variants []variant

func (v *variants) String() string { return fmt.Sprint(*v) }

func (v *variants) Set(s string) error {
	name, flags, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=worker-flags, got %q", s)
	}
	*v = append(*v, variant{name, flags})
	return nil
}

func main() {
	var f benchkit.Flags
	f.Register(flag.CommandLine)
	count := flag.Int("count", 20000, "failures pending when the outage starts")
	outage := flag.Duration("outage", 5*time.Minute, "how long the downstream answers 503 to everything")
	workers := flag.Int("workers", 3, "retry workers")
	stop := flag.Duration("sigstop", 4*time.Second, "how long one worker is SIGSTOPped, a minute into the outage")
	binary := flag.String("binary", "", "retryring binary (default: build it)")
	var vs variants
	flag.Var(&vs, "variant", "name=worker flags (repeatable); default one run with the default worker")
	flag.Parse()
	if len(vs) == 0 {
		vs = variants{{"default", ""}}
	}
	ctx := context.Background()
	s, err := f.Connect(ctx)
	if err != nil {
		fail(err)
	}
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	s.Close()
	bin := *binary
	if bin == "" {
		root, err := proc.ModuleRoot()
		if err != nil {
			fail(err)
		}
		bin = filepath.Join(os.TempDir(), "retryring-outage-bench")
		if err := proc.Build(ctx, root, bin, false); err != nil {
			fail(err)
		}
	}
	for _, v := range vs {
		r, err := run(ctx, f, bin, v, *count, *outage, *workers, *stop)
		if err != nil {
			fail(fmt.Errorf("%s: %w", v.name, err))
		}
		fmt.Println(r)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "outage bench:", err)
	os.Exit(1)
}

type result struct {
	name                              string
	count, outageCalls, repeated      int
	early, most                       int
	mostKey                           string
	recoveryToDrained                 time.Duration
	totalCalls, doneSteps, notDoneYet int
}

func (r result) String() string {
	return fmt.Sprintf("%-12s %d pending: %d calls during the outage; repeated attempts %d; early calls %d; most calls to one step %d (%s); "+
		"drained %v after the recovery (%d steps done, %d not); %d calls in all",
		r.name, r.count, r.outageCalls, r.repeated, r.early, r.most, r.mostKey,
		r.recoveryToDrained.Round(time.Second), r.doneSteps, r.notDoneYet, r.totalCalls)
}

func run(ctx context.Context, f benchkit.Flags, bin string, v variant, count int, outage time.Duration, workers int, stop time.Duration) (result, error) {
	res := result{name: v.name, count: count}
	dir, err := os.MkdirTemp("", "outage-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	g, err := proc.GroupIn(dir)
	if err != nil {
		return res, err
	}
	defer g.Close()
	ks := benchkit.KeyspaceName("outage")
	c, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: bin, Workers: workers, Cassandra: f.Addr, Keyspace: ks, Concurrency: 16,
		WorkerArgs: strings.Fields(v.flags),
		Downstream: downstream.Config{Latency: 40 * time.Millisecond},
	})
	if err != nil {
		return res, err
	}
	defer c.Close()
	defer dropKeyspace(ctx, f, ks)
	if _, err := c.WaitSettled(ctx); err != nil {
		return res, err
	}
	c.Downstream.SetUnavailable(true)
	batch, err := c.Record(ctx, proc.RecordOptions{Count: count, Instances: 20, Backdate: 2 * time.Minute})
	if err != nil {
		return res, err
	}
	start := time.Now()
	// A minute in, one worker pauses (SIGSTOP) and then the leader dies.
	if sleepUntil(ctx, start.Add(time.Minute)) {
		w := c.Workers()[len(c.Workers())-1]
		if err := w.Stop(); err == nil {
			sleepUntil(ctx, time.Now().Add(stop))
			_ = w.Cont()
		}
	}
	if sleepUntil(ctx, start.Add(90*time.Second)) {
		if leader, err := c.WaitLeader(ctx); err == nil {
			_ = leader.Kill9()
			_ = c.RestartCoordinator(ctx, leader)
		}
	}
	sleepUntil(ctx, start.Add(outage))
	recovered := time.Now()
	c.Downstream.SetUnavailable(false)

	ids := batch.IDs()
	deadline := recovered.Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		done := c.Downstream.DoneIDs()
		n := 0
		for _, id := range ids {
			if done[id] {
				n++
			}
		}
		res.doneSteps, res.notDoneYet = n, len(ids)-n
		if n == len(ids) {
			break
		}
		time.Sleep(time.Second)
	}
	res.recoveryToDrained = time.Since(recovered)
	execs := c.Downstream.Executions()
	res.totalCalls = len(execs)
	for _, e := range execs {
		if !e.Start.Before(start) && e.Start.Before(recovered) {
			res.outageCalls++
		}
	}
	res.repeated = len(downstream.RepeatedAttempts(execs))
	res.early = len(downstream.EarlyCalls(execs, 1, worker.DefaultMaxRetryDelay))
	res.most, res.mostKey = downstream.CallsPerStep(execs)
	return res, nil
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func dropKeyspace(ctx context.Context, f benchkit.Flags, ks string) {
	if f.Keep {
		return
	}
	s, err := f.Connect(ctx)
	if err != nil {
		return
	}
	defer s.Close()
	f.DropKeyspace(s, ks)
}
