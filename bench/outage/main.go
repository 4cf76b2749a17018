package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/wallclock"
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
	drainWait := flag.Duration("drain-wait", 30*time.Minute, "how long to wait after the recovery for every step to be done")
	keepLogs := flag.Bool("keep-logs", false, "keep the processes' logs (the directory is printed) instead of removing them")
	logLevel := flag.String("log-level", "", "the coordinators' and workers' --log-level (default: theirs)")
	var vs variants
	flag.Var(&vs, "variant", "name=worker flags (repeatable); default one run with the default worker")
	flag.Parse()
	if len(vs) == 0 {
		vs = variants{{"default", ""}}
	}
	ctx := context.Background()
	s, err := f.Connect(ctx)
	if err != nil {
		benchkit.Fail(err)
	}
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	s.Close()
	bin := *binary
	if bin == "" {
		root, err := proc.ModuleRoot()
		if err != nil {
			benchkit.Fail(err)
		}
		bin = filepath.Join(os.TempDir(), "retryring-outage-bench")
		if err := proc.Build(ctx, root, bin, false); err != nil {
			benchkit.Fail(err)
		}
	}
	for _, v := range vs {
		o := runOptions{count: *count, outage: *outage, workers: *workers, stop: *stop,
			drainWait: *drainWait, keepLogs: *keepLogs, logLevel: *logLevel}
		r, err := run(ctx, f, bin, v, o)
		if err != nil {
			benchkit.Fail(fmt.Errorf("%s: %w", v.name, err))
		}
		fmt.Println(r)
		fmt.Println(r.repeatReport)
		fmt.Printf("%s settling writes tried again, per worker: %v\n", r.name, r.retriedWrites)
		for _, l := range r.logLines {
			fmt.Println("  " + l)
		}
	}
}

type result struct {
	name                              string
	count, outageCalls, repeated      int
	early, most                       int
	mostKey                           string
	recoveryToDrained                 time.Duration
	totalCalls, doneSteps, notDoneYet int
	// repeatReport places every repeated attempt against the run's faults; logLines are the
	// workers' log lines that name a repeated step's transaction.
	repeatReport string
	logLines     []string
	// retriedWrites counts, per worker, the settling writes it had to try again (its log lines
	// saying so): what a stall costs when the worker still holds its lease.
	retriedWrites map[string]int
}

// runOptions are the flags one variant runs with.
type runOptions struct {
	count        int
	outage, stop time.Duration
	workers      int
	drainWait    time.Duration
	keepLogs     bool
	logLevel     string
}

func (r result) String() string {
	return fmt.Sprintf("%-12s %d pending: %d calls during the outage; repeated attempts %d; early calls %d; most calls to one step %d (%s); "+
		"drained %v after the recovery (%d steps done, %d not); %d calls in all",
		r.name, r.count, r.outageCalls, r.repeated, r.early, r.most, r.mostKey,
		r.recoveryToDrained.Round(time.Second), r.doneSteps, r.notDoneYet, r.totalCalls)
}

func run(ctx context.Context, f benchkit.Flags, bin string, v variant, o runOptions) (result, error) {
	res := result{name: v.name, count: o.count}
	dir, err := os.MkdirTemp("", "outage-bench-")
	if err != nil {
		return res, err
	}
	if o.keepLogs {
		fmt.Fprintf(os.Stderr, "%s: logs in %s\n", v.name, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		return res, err
	}
	defer g.Close()
	ks := benchkit.KeyspaceName("outage")
	c, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: bin, Workers: o.workers, Cassandra: f.Addr, Keyspace: ks, Concurrency: 16,
		WorkerArgs: strings.Fields(v.flags), LogLevel: o.logLevel,
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
	batch, err := c.Record(ctx, proc.RecordOptions{Count: o.count, Instances: 20, Backdate: 2 * time.Minute})
	if err != nil {
		return res, err
	}
	start := time.Now()
	var faults faultLog
	watch, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	for _, w := range c.Workers() {
		go watchExit(watch, w, &faults)
	}
	// A minute in, one worker pauses (SIGSTOP) and then the leader dies.
	if wallclock.Sleep(ctx, time.Until(start.Add(time.Minute))) {
		w := c.Workers()[len(c.Workers())-1]
		t0 := time.Now()
		if err := w.Stop(); err == nil {
			wallclock.Sleep(ctx, o.stop)
			_ = w.Cont()
			faults.add(fault{kind: "sigstop", who: w.ID, start: t0, end: time.Now()})
		}
	}
	if wallclock.Sleep(ctx, time.Until(start.Add(90*time.Second))) {
		if leader, err := c.WaitLeader(ctx); err == nil {
			t0 := time.Now()
			_ = leader.Kill9()
			_ = c.RestartCoordinator(ctx, leader)
			// The fault ends when a leader is known again (the restarted node or another).
			_, _ = c.WaitLeader(ctx)
			faults.add(fault{kind: "leader kill", who: leader.ID, start: t0, end: time.Now()})
		}
	}
	wallclock.Sleep(ctx, time.Until(start.Add(o.outage)))
	recovered := time.Now()
	c.Downstream.SetUnavailable(false)

	ids := batch.IDs()
	deadline := recovered.Add(o.drainWait)
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
	stopWatch()
	execs := c.Downstream.Executions()
	res.totalCalls = len(execs)
	for _, e := range execs {
		if !e.Start.Before(start) && e.Start.Before(recovered) {
			res.outageCalls++
		}
	}
	repeats := downstream.RepeatedAttempts(execs)
	res.repeated = len(repeats)
	// A fault's lease consequences last up to a TTL past its end (the default 10 s), plus the
	// holder bound's margins: 15 s still counts as that fault's.
	res.repeatReport = repeatReport(v.name, repeats, faults.all(), start, 15*time.Second)
	res.logLines = logLinesOf(c, repeats, 8)
	res.retriedWrites = countLogLines(c, retriedWriteMessage)
	res.early = len(downstream.EarlyCalls(execs, 1, worker.DefaultMaxRetryDelay))
	res.most, res.mostKey = downstream.CallsPerStep(execs)
	return res, nil
}

// watchExit records a worker that exits by itself (a crash) as a fault of the run.
func watchExit(ctx context.Context, w *proc.Worker, faults *faultLog) {
	select {
	case <-ctx.Done():
	case <-w.Exited():
		now := time.Now()
		faults.add(fault{kind: "worker exit", who: w.ID, start: now, end: now})
	}
}

// retriedWriteMessage is the worker's log message for a settling write it tries again.
const retriedWriteMessage = "a write settling an executed row failed; trying it again"

// countLogLines counts, per worker, the lines of its log that contain msg.
func countLogLines(c *proc.Cluster, msg string) map[string]int {
	out := map[string]int{}
	for _, w := range c.Workers() {
		b, err := os.ReadFile(w.LogPath())
		if err != nil {
			continue
		}
		out[w.ID] = strings.Count(string(b), msg)
	}
	return out
}

// logLinesOf returns the workers' log lines that name the transaction of a repeat, at most max
// per repeat: what the worker said about the row between its two calls.
func logLinesOf(c *proc.Cluster, repeats []downstream.Retry, max int) []string {
	var out []string
	for _, r := range repeats {
		n := 0
		for _, w := range c.Workers() {
			b, err := os.ReadFile(w.LogPath())
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if n < max && strings.Contains(line, `"`+r.Exec.TransactionID+`"`) {
					out = append(out, w.ID+": "+line)
					n++
				}
			}
		}
	}
	return out
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
