package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/testkit/benchkit"
)

type options struct {
	total, segment  int
	workers         []int
	impls           []string
	concurrency     int
	instances, rows int
	page            int
	maxRun          time.Duration

	// The cluster figure (-cluster): the same drain on the single node and on a cluster.
	cluster       []string
	clusterRepl   string
	consistency   string
	own           string
	killNode      int
	killAfter     time.Duration
	restartAfter  time.Duration
	recoveryTotal int
	clusterScript string
	compare       bool
}

func main() {
	var kit benchkit.Flags
	var o options
	var workers, impls string
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	kit.Register(fs)
	fs.IntVar(&o.total, "total", 150_000, "failures processed in all, per run")
	fs.IntVar(&o.segment, "segment", 15_000, "failures written and then drained at a time")
	fs.StringVar(&workers, "workers", "1,3", "worker counts to run, comma-separated")
	fs.StringVar(&impls, "impl", "ours,naive,naive+markers", "implementations to run: ours, naive (row deletes only), naive+markers (plus the STRICT marker protocol per row)")
	fs.IntVar(&o.concurrency, "concurrency", 100, "executions in flight per worker")
	fs.IntVar(&o.instances, "instances", 10, "ours: instances writing into each window")
	fs.IntVar(&o.rows, "rows", 500, "ours: failures per instance per window")
	fs.IntVar(&o.page, "page", 500, "rows per read: the worker's page size and the naive poll's LIMIT")
	fs.DurationVar(&o.maxRun, "max-run", 20*time.Minute, "stop a run that takes longer")
	var cluster string
	fs.StringVar(&cluster, "cluster", "", "contact points of a Cassandra cluster, comma-separated: run ours on -cassandra (replication 1), -own, and on the cluster (-cluster-replication), with the CPU of each process class (needs -impl ours)")
	fs.StringVar(&o.clusterRepl, "cluster-replication", "dc1=3", "replication of the keyspaces on -cluster, as schema apply --replication takes it")
	fs.StringVar(&o.consistency, "consistency", "", "consistency of every read and write with -cluster, on both targets (default the product's, LOCAL_QUORUM)")
	fs.StringVar(&o.own, "own", "", "with -cluster: host:port of a single node of the cluster nodes' settings, drained as a third target (replication 1)")
	fs.IntVar(&o.killNode, "kill-node", 0, "with -cluster: after the drains, the recovery figure: drain -recovery-total on the cluster, once as it is and once with node K SIGKILLed (0: no recovery figure)")
	fs.DurationVar(&o.killAfter, "kill-after", 20*time.Second, "time into the recovery drain at which node -kill-node is killed")
	fs.DurationVar(&o.restartAfter, "restart-after", 10*time.Second, "time after the kill at which the node is started again (cluster-start, which waits for it)")
	fs.IntVar(&o.recoveryTotal, "recovery-total", 120_000, "failures of each recovery drain, drained by the largest -workers count")
	fs.StringVar(&o.clusterScript, "cluster-script", "scripts/cassandra.sh", "the script whose cluster-kill and cluster-start kill and restart the node")
	fs.BoolVar(&o.compare, "compare", true, "with -cluster: drain -total on every target (false: the recovery figure alone)")
	_ = fs.Parse(os.Args[1:])
	for _, w := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			benchkit.Fail(fmt.Errorf("-workers: %q", w))
		}
		o.workers = append(o.workers, n)
	}
	for _, i := range strings.Split(impls, ",") {
		if i = strings.TrimSpace(i); i != "ours" && i != "naive" && i != "naive+markers" {
			benchkit.Fail(fmt.Errorf("-impl: %q", i))
		}
		o.impls = append(o.impls, strings.TrimSpace(i))
	}
	if o.segment%(o.instances*o.rows) != 0 {
		benchkit.Fail(fmt.Errorf("-segment %d must be a multiple of -instances × -rows = %d", o.segment, o.instances*o.rows))
	}

	if cluster != "" {
		for _, h := range strings.Split(cluster, ",") {
			o.cluster = append(o.cluster, strings.TrimSpace(h))
		}
		if len(o.impls) != 1 || o.impls[0] != "ours" {
			benchkit.Fail(fmt.Errorf("-cluster measures ours only: give -impl ours (got %q)", impls))
		}
		if o.recoveryTotal%(o.instances*o.rows) != 0 {
			benchkit.Fail(fmt.Errorf("-recovery-total %d must be a multiple of -instances × -rows = %d", o.recoveryTotal, o.instances*o.rows))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.cluster != nil {
		runCluster(ctx, &kit, o)
		return
	}
	s, err := kit.Connect(ctx)
	if err != nil {
		benchkit.Fail(err)
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())

	var summary []string
	for _, w := range o.workers {
		for _, impl := range o.impls {
			if ctx.Err() != nil {
				break
			}
			runCtx, cancel := context.WithTimeout(ctx, o.maxRun)
			var line string
			var err error
			switch impl {
			case "ours":
				line, err = runOurs(runCtx, &kit, s, o, w)
			case "naive":
				line, err = runNaive(runCtx, &kit, s, o, w, false)
			case "naive+markers":
				line, err = runNaive(runCtx, &kit, s, o, w, true)
			}
			cancel()
			if err != nil {
				line = fmt.Sprintf("| %s | %d | run failed: %v |", impl, w, err)
			}
			summary = append(summary, line)
		}
	}
	fmt.Printf("\n## Summary (load avg at the end: %s)\n\n", benchkit.LoadAvg())
	fmt.Println("| impl | workers | processed | tx/s first segment | tx/s last segment | tombstones per query, first → last segment | warnings in the log | aborted |")
	fmt.Println("|---|---:|---:|---:|---:|---|---:|---|")
	for _, l := range summary {
		fmt.Println(l)
	}
}

// logs follows the two logs where Cassandra reports reads that scanned too many tombstones.
type logs struct{ tombstones, system *benchkit.Log }

func openLogs() logs {
	return logs{tombstones: benchkit.OpenTombstoneLog(), system: benchkit.OpenSystemLog()}
}

// count returns the reads of ks that crossed tombstone_warn_threshold (tombstone log) and those
// aborted at tombstone_failure_threshold (system log) since the logs were opened, and the first
// abort's line.
func (l logs) count(ks string) (warn, abort int, firstAbort string) {
	w, err := l.tombstones.Lines(ks+".", "tombstone_warn_threshold")
	if err != nil {
		w = nil
		warn = -1
	}
	warn += len(w)
	a, err := l.system.Lines(ks+".", "Scanned over")
	if err != nil {
		return warn, -1, ""
	}
	if len(a) > 0 {
		firstAbort = a[0]
	}
	return warn, len(a), firstAbort
}

func printHistograms(ctx context.Context, s *gocql.Session, ks string) {
	hs, err := benchkit.TombstonesPerRead(ctx, s, ks)
	if err != nil {
		fmt.Println("tombstones_per_read:", err)
		return
	}
	fmt.Printf("\nCassandra's tombstones_per_read for %s (all reads of the run, bucketed):\n\n", ks)
	benchkit.PrintHistograms(os.Stdout, hs)
}
