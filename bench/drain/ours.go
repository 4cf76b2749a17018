package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

// tiers is the tombstones scanned by one traced query of each tier, tiers 1 to 5.
type tiers [5]int

func (t tiers) max() int {
	m := 0
	for _, v := range t {
		m = max(m, v)
	}
	return m
}

func (t tiers) String() string { return fmt.Sprintf("%d/%d/%d/%d/%d", t[0], t[1], t[2], t[3], t[4]) }

func runOurs(ctx context.Context, kit *benchkit.Flags, s *gocql.Session, o options, workers int) (string, error) {
	ks, err := benchkit.NewKeyspace(ctx, s, fmt.Sprintf("drain_ours_w%d", workers))
	if err != nil {
		return "", err
	}
	defer kit.DropKeyspace(s, ks)
	d, err := newDrain(s, ks, o, workers)
	if err != nil {
		return "", err
	}
	store, exec, scanners, hist := d.store, d.exec, d.scanners, d.hist
	log := openLogs()

	fmt.Printf("\n## ours, %d worker(s), keyspace %s, load avg %s\n\n", workers, ks, benchkit.LoadAvg())
	fmt.Printf("%d instances × %d failures per one-minute window, %d windows per segment; concurrency %d per worker, page %d.\n",
		o.instances, o.rows, o.segment/hist.PerWindow(), o.concurrency, o.page)
	fmt.Println("Tombstones: one traced query per tier (1/2/3/4/5) before the segment's drain; tiers 1+2 of an idle cycle after it.")
	fmt.Println()
	fmt.Println("| processed | record s | drain s | tx/s | statements/tx | cycles | tombstones before drain (t1/t2/t3/t4/t5) | idle scan after | load avg |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---|---:|---|")

	processed := 0
	var firstRate, lastRate float64
	var firstTomb, lastTomb int
	for processed < o.total && ctx.Err() == nil {
		t0 := time.Now()
		n, ws, err := hist.Write(ctx, o.segment/hist.PerWindow())
		if err != nil {
			return "", err
		}
		recordDur := time.Since(t0)
		before, err := probeTiers(ctx, s, store, ws[0])
		if err != nil {
			return "", err
		}
		calls, stmts := exec.Calls.Load(), store.Statements()
		dr := benchkit.DrainAll(ctx, scanners, 50)
		done := exec.Calls.Load() - calls
		for _, e := range dr.Errors {
			fmt.Fprintln(os.Stderr, "cycle error:", e)
		}
		if done != int64(n) {
			return "", fmt.Errorf("segment after %d: %d written, %d executed, %d cycle errors (see stderr)", processed, n, done, len(dr.Errors))
		}
		stmtPerTx := float64(store.Statements()-stmts) / float64(max(done, 1))
		idle, err := probeIdle(ctx, s, store)
		if err != nil {
			return "", err
		}
		processed += int(done)
		rate := float64(done) / dr.Elapsed.Seconds()
		if firstRate == 0 {
			firstRate, firstTomb = rate, before.max()
		}
		lastRate, lastTomb = rate, before.max()
		fmt.Printf("| %d | %.1f | %.1f | %.0f | %.2f | %d | %s | %d | %s |\n", processed, recordDur.Seconds(),
			dr.Elapsed.Seconds(), rate, stmtPerTx, dr.Cycles, before, idle, benchkit.LoadAvg())
	}
	warn, abort, _ := log.count(ks)
	printHistograms(ctx, s, ks)
	fmt.Printf("\nTombstone log lines naming %s: %d warnings, %d aborts.\n", ks, warn, abort)
	return fmt.Sprintf("| ours | %d | %d | %.0f | %.0f | %d → %d (max of one query per tier) | %d | no |",
		workers, processed, firstRate, lastRate, firstTomb, lastTomb, warn), nil
}

// probeTiers traces the reads a worker's next cycle makes, one query per tier: the live days of
// this year and last (checkpoint and scan), the live windows of w's day, the instances of w over
// the whole ring, the buckets of its first instance, the first page of its first bucket.
func probeTiers(ctx context.Context, s *gocql.Session, store *cassandra.Store, w window.Window) (tiers, error) {
	var t tiers
	var instances []cassandra.Instance
	var buckets []int
	year := window.DateOf(time.Now()).Year
	steps := []func(*cassandra.Store) error{
		func(st *cassandra.Store) error {
			for _, y := range []int{year - 1, year} {
				if _, _, err := st.ListLiveDays(ctx, y); err != nil {
					return err
				}
			}
			return nil
		},
		func(st *cassandra.Store) error { _, _, err := st.ListLiveWindows(ctx, w.Day); return err },
		func(st *cassandra.Store) (err error) {
			instances, err = st.ListInstances(ctx, w, lease.FullRing)
			return err
		},
		func(st *cassandra.Store) (err error) {
			if len(instances) == 0 {
				return fmt.Errorf("probe: no instance in %s", w)
			}
			buckets, err = st.ListBuckets(ctx, w, instances[0].ID)
			return err
		},
		func(st *cassandra.Store) error {
			if len(buckets) == 0 {
				return fmt.Errorf("probe: no bucket of %s in %s", instances[0].ID, w)
			}
			_, _, err := st.ReadBucketPage(ctx, cassandra.BucketKey{Window: w, InstanceID: instances[0].ID, Bucket: buckets[0]}, nil)
			return err
		},
	}
	for i, step := range steps {
		rs, err := benchkit.Traced(ctx, s, store, step)
		if err != nil {
			return t, fmt.Errorf("probe tier %d: %w", i+1, err)
		}
		t[i] = rs.Tombstones
	}
	return t, nil
}

// probeIdle traces the directory scans every cycle repeats when there is nothing to do: the live
// days of this year and last, and the live windows of each of them and of the lookback days.
func probeIdle(ctx context.Context, s *gocql.Session, store *cassandra.Store) (int, error) {
	today := window.DateOf(time.Now())
	rs, err := benchkit.Traced(ctx, s, store, func(st *cassandra.Store) error {
		days := map[window.Date]bool{}
		for d := today.AddDays(-worker.DefaultLookbackDays); !d.After(today); d = d.AddDays(1) {
			days[d] = true
		}
		for _, y := range []int{today.Year - 1, today.Year} {
			listed, _, err := st.ListLiveDays(ctx, y)
			if err != nil {
				return err
			}
			for _, d := range listed {
				days[d] = true
			}
		}
		for d := range days {
			if _, _, err := st.ListLiveWindows(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	return rs.Tombstones, err
}

// drain is what every drain of ours starts from, on whichever Cassandra: the store of a keyspace,
// scanners on static leases splitting the ring, their no-op executor (it counts the calls), and
// the history writer, its first window far enough back that every window of the history has
// passed when it is drained.
type drain struct {
	store    *cassandra.Store
	exec     *benchkit.NoopExecutor
	scanners []*worker.Scanner
	hist     *benchkit.History
}

func newDrain(s *gocql.Session, ks string, o options, workers int) (*drain, error) {
	store, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1, PageSize: o.page})
	if err != nil {
		return nil, err
	}
	exec := &benchkit.NoopExecutor{}
	scanners, err := benchkit.NewScanners(store, benchkit.StaticGuards(workers, 24*time.Hour), exec, o.concurrency)
	if err != nil {
		return nil, err
	}
	windows := o.total / (o.instances * o.rows)
	hist := &benchkit.History{Store: store, Instances: o.instances, RowsPerInstance: o.rows,
		First: benchkit.PastWindow(time.Duration(windows+10) * time.Minute)}
	return &drain{store: store, exec: exec, scanners: scanners, hist: hist}, nil
}
