package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/testkit/benchkit"
)

// recovery is one drain of the recovery figure: with a node killed a few seconds in and started
// again later, or the same drain with no kill (the baseline).
type recovery struct {
	kill                 bool
	written              int
	recordFor            time.Duration
	start, end           time.Time // the drain: from its first cycle to its last execution
	killAt, restartAt    time.Time // the kill, and when cluster-start was run for the node
	upAt                 time.Time // when cluster-start returned (the node answers CQL and is in the ring)
	execs                []execution
	distinct, cycleFails int
	firstCycleError      error
	scriptErr            error
}

// runRecovery writes o.recoveryTotal failures on the cluster t and drains them with the largest
// worker count; with kill, a goroutine SIGKILLs node o.killNode o.killAfter into the drain and
// starts it again o.restartAfter later (scripts/cassandra.sh cluster-kill, cluster-start).
// The drain goes on through failed cycles until every failure ran once, or the run's bound.
func runRecovery(ctx context.Context, kit *benchkit.Flags, o options, t target, kill bool) (*recovery, error) {
	workers := o.workers[len(o.workers)-1]
	ks, err := newKeyspace(ctx, t, fmt.Sprintf("drain_recovery_w%d", workers))
	if err != nil {
		return nil, err
	}
	defer kit.DropKeyspace(t.s, ks)
	store, err := cassandra.NewStore(t.s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1, PageSize: o.page})
	if err != nil {
		return nil, err
	}
	tl := &timeline{}
	scanners, err := benchkit.NewScanners(store, benchkit.StaticGuards(workers, 24*time.Hour), tl, o.concurrency)
	if err != nil {
		return nil, err
	}
	windows := o.recoveryTotal / (o.instances * o.rows)
	hist := &benchkit.History{Store: store, Instances: o.instances, RowsPerInstance: o.rows,
		First: benchkit.PastWindow(time.Duration(windows+10) * time.Minute)}
	r := &recovery{kill: kill}
	fmt.Printf("\n## recovery on %s (replication %s), %d worker(s), keyspace %s, kill node %d: %v, load avg %s\n",
		t.name, t.replText, workers, ks, o.killNode, kill, benchkit.LoadAvg())
	t0 := time.Now()
	if r.written, _, err = hist.Write(ctx, windows); err != nil {
		return nil, err
	}
	r.recordFor = time.Since(t0)

	r.start = time.Now()
	var wg sync.WaitGroup
	if kill {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.scriptErr = r.killAndRestart(ctx, o)
		}()
	}
	for tl.distinct() < r.written && ctx.Err() == nil {
		dr := benchkit.DrainAll(ctx, scanners, 50)
		r.cycleFails += len(dr.Errors)
		if len(dr.Errors) > 0 && r.firstCycleError == nil {
			r.firstCycleError = dr.Errors[0]
		}
		if tl.distinct() < r.written {
			// A round without progress: cycles failed (a node just died) or found nothing yet.
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	r.execs = tl.snapshot()
	r.distinct = tl.distinct()
	r.end = time.Now()
	if len(r.execs) > 0 {
		r.end = r.execs[len(r.execs)-1].at
	}
	// The node must be back before the next run, whether or not the drain outlasted its restart.
	wg.Wait()
	fmt.Printf("recorded %d in %.1f s; drained %d of them in %.1f s, %d cycle errors\n", r.written, r.recordFor.Seconds(),
		r.distinct, r.end.Sub(r.start).Seconds(), r.cycleFails)
	if r.firstCycleError != nil {
		fmt.Printf("first cycle error: %v\n", r.firstCycleError)
	}
	return r, nil
}

// killAndRestart SIGKILLs the node o.killAfter after r.start and runs cluster-start for it
// o.restartAfter after the kill; cluster-start returns once the node answers CQL and the ring
// shows it up.
func (r *recovery) killAndRestart(ctx context.Context, o options) error {
	node := strconv.Itoa(o.killNode)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(r.start.Add(o.killAfter))):
	}
	r.killAt = time.Now()
	if err := clusterScript(ctx, o.clusterScript, "cluster-kill", node); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(r.killAt.Add(o.restartAfter))):
	}
	r.restartAt = time.Now()
	err := clusterScript(ctx, o.clusterScript, "cluster-start", node)
	r.upAt = time.Now()
	return err
}

// clusterScript runs scripts/cassandra.sh with args and copies its output, prefixed with the time.
func clusterScript(ctx context.Context, script string, args ...string) error {
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fmt.Printf("%s %s: %s\n", t0.Format("15:04:05"), strings.Join(args, " "), l)
	}
	fmt.Printf("%s %s: took %.1f s\n", time.Now().Format("15:04:05"), strings.Join(args, " "), time.Since(t0).Seconds())
	if err != nil {
		return fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	return nil
}

// recoveryRow is r as a table row. The rates are taken in the 10 s before (from the drain's
// start at the earliest) and after the kill run's kill, from the kill until the node was back
// (or the drain ended), and in the 10 s after the node was back; all at offsets from the start of
// each drain, so that the baseline is read at the same moments.
func recoveryRow(r, killed *recovery) string {
	const span = 10 * time.Second
	killOff := killed.killAt.Sub(killed.start)
	upOff := killed.upAt.Sub(killed.start)
	at := func(off time.Duration) time.Time { return r.start.Add(off) }
	gap, after := longestGap(r.execs)
	name := "no kill (baseline)"
	if r.kill {
		name = "node killed"
	}
	afterUp := "drained before the node was back"
	down := r.end // the drain's span without the node: up to its return, or the drain's end
	if killed.upAt.IsZero() {
		afterUp = "node not restarted"
	} else if at(upOff).Before(r.end) {
		afterUp = fmt.Sprintf("%.0f", rate(r.execs, at(upOff), span))
		down = at(upOff)
	}
	// The span before the kill starts no earlier than the drain.
	before := max(killOff-span, 0)
	return fmt.Sprintf("| %s | %d | %.1f | %.0f | %.2f s at +%.1f s | %.0f | %.0f | %.0f | %s | %d | %d | %d |",
		name, r.written, r.end.Sub(r.start).Seconds(), float64(r.distinct)/r.end.Sub(r.start).Seconds(),
		gap.Seconds(), after.Sub(r.start).Seconds(), rate(r.execs, at(before), killOff-before), rate(r.execs, at(killOff), span),
		rate(r.execs, at(killOff), down.Sub(at(killOff))), afterUp, twice(r.execs), r.written-r.distinct, r.cycleFails)
}

// runRecoveries runs the baseline and then the drain with a node killed, and prints both.
func runRecoveries(ctx context.Context, kit *benchkit.Flags, o options, t target) {
	var runs []*recovery
	for _, kill := range []bool{false, true} {
		if ctx.Err() != nil {
			fmt.Printf("\nrecovery stopped: %v\n", ctx.Err())
			return
		}
		runCtx, cancel := context.WithTimeout(ctx, o.maxRun)
		r, err := runRecovery(runCtx, kit, o, t, kill)
		cancel()
		if err != nil {
			fmt.Printf("\nrecovery run (kill %v) failed: %v\n", kill, err)
			return
		}
		runs = append(runs, r)
	}
	killed := runs[1]
	if killed.scriptErr != nil {
		fmt.Printf("\nkill or restart failed: %v\n", killed.scriptErr)
	}
	fmt.Printf("\n## Recovery after a node kill (load avg at the end: %s)\n\n", benchkit.LoadAvg())
	fmt.Printf("Node %d SIGKILLed %.1f s into the drain; cluster-start run %.1f s after the kill, node back (CQL and ring) %.1f s after the kill.\n",
		o.killNode, killed.killAt.Sub(killed.start).Seconds(), killed.restartAt.Sub(killed.killAt).Seconds(), killed.upAt.Sub(killed.killAt).Seconds())
	fmt.Println("Rates are executions per second in 10 s spans at the kill run's offsets from the start of each drain.")
	fmt.Println()
	fmt.Println("| run | failures | drain s | per s | longest gap between executions | per s, 10 s before the kill | per s, 10 s after the kill | per s, kill to node back (or drain end) | per s, 10 s after the node was back | executed twice | lost | cycle errors |")
	fmt.Println("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		fmt.Println(recoveryRow(r, killed))
	}
	if killed.scriptErr != nil {
		fmt.Fprintln(os.Stderr, "kill or restart failed:", killed.scriptErr)
	}
}
