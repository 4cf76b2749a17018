package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/window"
)

// directoryReader is the part of *cassandra.Store the inspector reads with (every statement
// stays in package cassandra).
type directoryReader interface {
	ListDays(ctx context.Context, year int, from window.Date) ([]window.Date, error)
	ListWindows(ctx context.Context, d window.Date, fromMinute int) ([]window.Window, error)
	ListAllInstances(ctx context.Context, w window.Window, limit int) ([]cassandra.Instance, error)
	ListBuckets(ctx context.Context, w window.Window, instanceID string) ([]int, error)
	ForEachTransaction(ctx context.Context, b cassandra.BucketKey, fn func(cassandra.Transaction) error) error
	ListDeadLetters(ctx context.Context, deadDay window.Date) ([]cassandra.DeadLetter, error)
}

// inspector reads the retry directory and the dead letters on the side, as an operator's
// query would: it never writes, and never asks for a lease (it only counts).
type inspector struct {
	store  directoryReader
	offset time.Duration
	since  window.Date // the first day of the run: dead letters are listed from it
	now    func() time.Time

	// rows turns the row scans on. Before the first window opens only the burst, whose rows
	// the demo knows, has written anything: reading them again would only load Cassandra.
	rows atomic.Bool

	mu sync.Mutex
	// seen: per window, the transactions found in it before it opened. A window is scanned
	// until a scan that started after the window's start (when every write into it had
	// ended, by the W+1 protocol): then it is final.
	seen  map[window.Window]map[string]bool
	final map[window.Window]bool
	dead  map[string]deadLetter
	err   error
}

func newInspector(store directoryReader, offset time.Duration, now func() time.Time) *inspector {
	return &inspector{
		store: store, offset: offset, since: window.DateOf(now()), now: now,
		seen: map[window.Window]map[string]bool{}, final: map[window.Window]bool{}, dead: map[string]deadLetter{},
	}
}

// days lists the live days of the years the run touches.
func (in *inspector) days(ctx context.Context, now time.Time) ([]window.Date, error) {
	years := []int{in.since.Year}
	for _, y := range []int{now.UTC().Year(), now.UTC().Add(24 * time.Hour).Year()} {
		if y != years[len(years)-1] {
			years = append(years, y)
		}
	}
	var out []window.Date
	for _, y := range years {
		ds, err := in.store.ListDays(ctx, y, window.FirstOfYear(y))
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// windowRows lists the transaction ids of every row of a window.
func (in *inspector) windowRows(ctx context.Context, w window.Window) ([]string, error) {
	insts, err := in.store.ListAllInstances(ctx, w, 0)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, inst := range insts {
		buckets, err := in.store.ListBuckets(ctx, w, inst.ID)
		if err != nil {
			return nil, err
		}
		for _, b := range buckets {
			err := in.store.ForEachTransaction(ctx, cassandra.BucketKey{Window: w, InstanceID: inst.ID, Bucket: b},
				func(t cassandra.Transaction) error {
					ids = append(ids, t.ID)
					return nil
				})
			if err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}

// scan reads the rows of every window that is not final yet, and the dead letters.
func (in *inspector) scan(ctx context.Context) error {
	started := in.now()
	err := in.scanOnce(ctx, started)
	in.mu.Lock()
	in.err = err
	in.mu.Unlock()
	return err
}

func (in *inspector) scanOnce(ctx context.Context, started time.Time) error {
	days, err := in.days(ctx, started)
	if err != nil {
		return err
	}
	for _, d := range days {
		if !in.rows.Load() {
			break
		}
		ws, err := in.store.ListWindows(ctx, d, 0)
		if err != nil {
			return err
		}
		for _, w := range ws {
			in.mu.Lock()
			final := in.final[w]
			in.mu.Unlock()
			if final {
				continue
			}
			ids, err := in.windowRows(ctx, w)
			if err != nil {
				return err
			}
			in.mu.Lock()
			if in.seen[w] == nil {
				in.seen[w] = map[string]bool{}
			}
			for _, id := range ids {
				in.seen[w][id] = true
			}
			if !started.Before(w.Start()) {
				in.final[w] = true
			}
			in.mu.Unlock()
		}
	}
	for d := in.since; !d.After(window.DateOf(started)); d = d.AddDays(1) {
		dls, err := in.store.ListDeadLetters(ctx, d)
		if err != nil {
			return err
		}
		in.mu.Lock()
		for _, dl := range dls {
			in.dead[dl.Transaction.ID] = deadLetter{Window: dl.Bucket.Window, LastStatus: dl.LastStatus, Attempts: dl.Transaction.Attempt,
				Replayed: dl.ReplayedBy != ""}
		}
		in.mu.Unlock()
	}
	return nil
}

// run scans every period until ctx ends.
func (in *inspector) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_ = in.scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// state returns copies of what the scans found, and the last scan's error.
func (in *inspector) state() (map[window.Window]map[string]bool, map[string]deadLetter, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	seen := make(map[window.Window]map[string]bool, len(in.seen))
	for w, ids := range in.seen {
		c := make(map[string]bool, len(ids))
		for id := range ids {
			c[id] = true
		}
		seen[w] = c
	}
	dead := make(map[string]deadLetter, len(in.dead))
	for id, d := range in.dead {
		dead[id] = d
	}
	return seen, dead, in.err
}

// Leftover is what the directory still holds: product.md's invariant 8 says that after a drain
// tiers 3 to 5 are empty, tier 2 holds only windows whose time has not passed and tier 1 only
// days not over.
type Leftover struct {
	Rows, Instances, Buckets int
	// RowsNotOpen are rows in windows not open yet (copies of steps that were done before
	// their window came; the worker skips them when it opens).
	RowsNotOpen int
	// PassedWindows and PassedDays are tier-2 and tier-1 rows that Node-0 may delete already.
	PassedWindows, PassedDays int
}

// leftover reads the whole directory once.
func (in *inspector) leftover(ctx context.Context) (Leftover, error) {
	var lo Leftover
	now := in.now()
	days, err := in.days(ctx, now)
	if err != nil {
		return lo, err
	}
	for _, d := range days {
		if window.DeletableDay(d, now, in.offset) {
			lo.PassedDays++
		}
		ws, err := in.store.ListWindows(ctx, d, 0)
		if err != nil {
			return lo, err
		}
		for _, w := range ws {
			if window.DeletableWindow(w, now, in.offset) {
				lo.PassedWindows++
			}
			insts, err := in.store.ListAllInstances(ctx, w, 0)
			if err != nil {
				return lo, err
			}
			lo.Instances += len(insts)
			for _, inst := range insts {
				buckets, err := in.store.ListBuckets(ctx, w, inst.ID)
				if err != nil {
					return lo, err
				}
				lo.Buckets += len(buckets)
				for _, b := range buckets {
					n := 0
					err := in.store.ForEachTransaction(ctx, cassandra.BucketKey{Window: w, InstanceID: inst.ID, Bucket: b},
						func(cassandra.Transaction) error { n++; return nil })
					if err != nil {
						return lo, err
					}
					lo.Rows += n
					if !window.Readable(w, now, in.offset) {
						lo.RowsNotOpen += n
					}
				}
			}
		}
	}
	return lo, nil
}
