package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/benchkit"
)

// target is a Cassandra the cluster figure drains on: the shared single node or the cluster,
// each with the replication of the keyspaces the runs create on it.
type target struct {
	name  string
	hosts []string
	s     *gocql.Session
	repl  cassandra.Replication
	// replText is repl as given on the command line, for the tables.
	replText string
}

// connect opens a session on hosts with the project's settings, at consistency (empty: the
// product's default, LOCAL_QUORUM), with benchkit's timeouts for a shared 2-core machine.
func connect(ctx context.Context, hosts []string, consistency string) (*gocql.Session, error) {
	return cassandra.Connect(ctx, cassandra.Config{Hosts: hosts, Consistency: consistency, Timeout: 20 * time.Second})
}

// newKeyspace creates a keyspace of t's replication with the retry directory's schema.
func newKeyspace(ctx context.Context, t target, what string) (string, error) {
	ks := benchkit.KeyspaceName(what)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return ks, cassandra.ApplySchema(ctx, t.s, ks, t.repl)
}

// runTarget writes and drains o.total failures on t, segment by segment, as runOurs does without
// the tombstone probes, and says where the CPU went in each phase: the recorder writing a segment,
// then the workers draining it.
func runTarget(ctx context.Context, kit *benchkit.Flags, o options, t target, workers int, cpu cpuClasses, names []string) (string, error) {
	ks, err := newKeyspace(ctx, t, fmt.Sprintf("drain_%s_w%d", t.name, workers))
	if err != nil {
		return "", err
	}
	defer kit.DropKeyspace(t.s, ks)
	d, err := newDrain(t.s, ks, o, workers)
	if err != nil {
		return "", err
	}
	exec, scanners, hist := d.exec, d.scanners, d.hist
	cores := runtime.NumCPU()

	fmt.Printf("\n## %s (replication %s), %d worker(s), keyspace %s, load avg %s\n\n", t.name, t.replText, workers, ks, benchkit.LoadAvg())
	head, align := cpuHeader(names)
	fmt.Printf("| phase | failures | s | per s | %s |\n", head)
	fmt.Printf("|---|---:|---:|---:|%s\n", align)
	var rec, drain cpuSpan
	processed := 0
	for processed < o.total && ctx.Err() == nil {
		s0, err := cpu.take()
		if err != nil {
			return "", err
		}
		n, _, err := hist.Write(ctx, o.segment/hist.PerWindow())
		if err != nil {
			return "", err
		}
		s1, err := cpu.take()
		if err != nil {
			return "", err
		}
		calls := exec.Calls.Load()
		dr := benchkit.DrainAll(ctx, scanners, 50)
		s2, err := cpu.take()
		if err != nil {
			return "", err
		}
		done := exec.Calls.Load() - calls
		for _, e := range dr.Errors {
			fmt.Fprintln(os.Stderr, "cycle error:", e)
		}
		if done != int64(n) {
			return "", fmt.Errorf("segment after %d: %d written, %d executed, %d cycle errors (see stderr)", processed, n, done, len(dr.Errors))
		}
		processed += n
		r, d := s1.since(s0), s2.since(s1)
		fmt.Printf("| record | %d | %.1f | %.0f | %s |\n", n, r.wall.Seconds(), float64(n)/r.wall.Seconds(), r.cells(names, cores))
		fmt.Printf("| drain | %d | %.1f | %.0f | %s |\n", n, d.wall.Seconds(), float64(n)/d.wall.Seconds(), d.cells(names, cores))
		rec, drain = rec.add(r), drain.add(d)
	}
	return fmt.Sprintf("| %s | %s | %d | %d | %.0f | %.0f | %s |", t.name, t.replText, workers, processed,
		float64(processed)/rec.wall.Seconds(), float64(processed)/drain.wall.Seconds(), drain.cells(names, cores)), nil
}

// runCompare drains the same load on each target with each worker count, one after the other.
func runCompare(ctx context.Context, kit *benchkit.Flags, o options, targets []target) []string {
	var summary []string
	cpu := newCPUClasses(targets)
	var names []string
	for _, t := range targets {
		names = append(names, t.name)
	}
	for _, w := range o.workers {
		for _, t := range targets {
			if ctx.Err() != nil {
				return summary
			}
			runCtx, cancel := context.WithTimeout(ctx, o.maxRun)
			line, err := runTarget(runCtx, kit, o, t, w, cpu, names)
			cancel()
			if err != nil {
				line = fmt.Sprintf("| %s | %s | %d | run failed: %v |", t.name, t.replText, w, err)
			}
			summary = append(summary, line)
		}
	}
	return summary
}

// runCluster is the cluster figure: the drain on the shared single node and on o.own, both of
// replication 1, and on the cluster (o.clusterRepl), for each worker count; then, with
// o.killNode, the recovery drains on the cluster.
func runCluster(ctx context.Context, kit *benchkit.Flags, o options) {
	repl, err := cassandra.ParseReplication(o.clusterRepl)
	if err != nil {
		benchkit.Fail(err)
	}
	targets := []target{{name: "shared", hosts: []string{kit.Addr}, repl: cassandra.Replication{Factor: 1}, replText: "1"}}
	if o.own != "" {
		targets = append(targets, target{name: "own", hosts: []string{o.own}, repl: cassandra.Replication{Factor: 1}, replText: "1"})
	}
	targets = append(targets, target{name: "cluster", hosts: o.cluster, repl: repl, replText: o.clusterRepl})
	for i := range targets {
		t := &targets[i]
		if t.s, err = connect(ctx, t.hosts, o.consistency); err != nil {
			benchkit.Fail(fmt.Errorf("%s %v: %w", t.name, t.hosts, err))
		}
		defer t.s.Close()
	}
	consistency := o.consistency
	if consistency == "" {
		consistency = cassandra.DefaultConsistency
	}
	benchkit.Describe(ctx, targets[0].s).Print(os.Stdout, benchkit.Command())
	for _, t := range targets[1:] {
		m := benchkit.Describe(ctx, t.s)
		fmt.Printf("%-10s %v, %s, commitlog_sync %s, replication %s\n", t.name+":", t.hosts, m.Cassandra, m.CommitLog, t.replText)
	}
	fmt.Printf("consistency %s on every target; CPU of a Cassandra JVM counts for the target whose host is its listen_address\n", consistency)
	if !o.compare {
		if o.killNode > 0 {
			runRecoveries(ctx, kit, o, targets[len(targets)-1])
		}
		return
	}
	summary := runCompare(ctx, kit, o, targets)
	var names []string
	for _, t := range targets {
		names = append(names, t.name)
	}
	head, align := cpuHeader(names)
	fmt.Printf("\n## Summary (load avg at the end: %s)\n\n", benchkit.LoadAvg())
	fmt.Printf("| target | replication | workers | processed | record per s | drain per s | drain: %s |\n", head)
	fmt.Printf("|---|---|---:|---:|---:|---:|%s\n", align)
	for _, l := range summary {
		fmt.Println(l)
	}
	if o.killNode > 0 && ctx.Err() == nil {
		runRecoveries(ctx, kit, o, targets[len(targets)-1])
	}
}
