package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/clockcheck"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/wallclock"
	"github.com/retryring/retryring/window"
)

// recordOptions drive `retryring record`, a load generator that records failures as regular
// service instances would.
type recordOptions struct {
	cf          cassandraFlags
	ring        ringFlags
	instances   int
	count       int
	rate        float64
	backdate    time.Duration
	concurrency int
	bucketSize  int
	implType    string
	prefix      string
	// maxClockOffset is the bound the recorders' clock is checked against (half of it each).
	maxClockOffset time.Duration
}

func newRecordCommand() *cobra.Command {
	var o recordOptions
	cmd := &cobra.Command{
		Use:   "record",
		Short: "Record failures as regular service instances would (load generator, legacy import)",
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindEnv(cmd, os.LookupEnv)
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runRecord(cmd.Context(), cmd, o) },
	}
	fs := cmd.Flags()
	o.cf.register(fs)
	o.ring.register(fs)
	fs.IntVar(&o.instances, "instances", 3, "number of regular-service instances recording (instance ids <service>-pod-<i>)")
	fs.IntVar(&o.count, "count", 1000, "failures to record in all")
	fs.Float64Var(&o.rate, "rate", 0, "failures per second in all; 0 records as fast as possible (with --backdate: in batches of 1,000 into one window)")
	fs.DurationVar(&o.backdate, "backdate", 0, "write into the windows of this long ago (import of a legacy queue, tests); 0 writes into W+1")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent writes")
	fs.IntVar(&o.bucketSize, "bucket-size", recorder.DefaultBucketSize, "rows per bucket partition")
	fs.StringVar(&o.implType, "impl-type", "PaymentStep", "saga step (stacksaga_impl_type) of the recorded failures")
	fs.DurationVar(&o.maxClockOffset, "max-clock-offset", clockcheck.DefaultMaxClockOffset, "bound on the offset between any two processes' clocks: this process records only while within half of it from Cassandra's")
	fs.StringVar(&o.prefix, "tx-prefix", "", "transaction id prefix (default: a per-run prefix, so runs never collide)")
	annotateEnv(cmd)
	return cmd
}

func runRecord(ctx context.Context, cmd *cobra.Command, o recordOptions) error {
	if o.instances < 1 || o.count < 0 || o.concurrency < 1 || o.rate < 0 {
		return errors.New("record: --instances and --concurrency must be at least 1, --count and --rate not negative")
	}
	if o.prefix == "" {
		o.prefix = fmt.Sprintf("tx-%d-", time.Now().UnixNano())
	}
	session, err := o.cf.connect(ctx)
	if err != nil {
		return err
	}
	defer session.Close()
	store, err := cassandra.NewStore(session, cassandra.StoreConfig{Keyspace: o.cf.keyspace, Ring: o.ring.key(), WindowMinutes: o.ring.windowMinutes})
	if err != nil {
		return err
	}
	// Measure first, and record only on a trusted clock.
	mon, stopMon, err := checkedClock(ctx, session, lease.SystemClock{}, o.maxClockOffset, "record", "nothing recorded")
	if err != nil {
		return err
	}
	defer stopMon()
	recs := make([]*recorder.Recorder, o.instances)
	for i := range recs {
		recs[i], err = recorder.New(store, recorder.Config{
			InstanceID: fmt.Sprintf("%s-pod-%d", o.ring.service, i), BucketSize: o.bucketSize, Backdate: o.backdate,
			ClockCheck: mon, AllowWeakConsistency: o.cf.allowWeak,
		})
		if err != nil {
			return err
		}
	}
	defer fmt.Fprintln(cmd.OutOrStdout(), clockSummary(mon.Status()))

	if o.backdate > 0 && o.rate == 0 {
		return runBackdatedImport(ctx, cmd, o, recs)
	}
	// With --rate, a backdated failure is imported on its own as it falls due, into the window
	// after the one the clock showed --backdate before then: a late writer that keeps writing
	// while workers drain the windows it writes into.
	start := time.Now()
	var next, done, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(o.count) || ctx.Err() != nil {
					return
				}
				if o.rate > 0 { // the i-th failure is due at start + i/rate
					due := start.Add(time.Duration(float64(i) / o.rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						if !wallclock.Sleep(ctx, d) {
							return
						}
					}
				}
				f := recorder.Failure{TransactionID: fmt.Sprintf("%s%d", o.prefix, i), ImplType: o.implType, AllocationKey: fmt.Sprint(i % 97)}
				rec := recs[i%int64(len(recs))]
				_, err := rec.Record(ctx, f)
				if windowCutOff(ctx, err) {
					_, err = rec.Record(ctx, f)
				}
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { firstErr = err })
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var statements uint64 // each recorder counts its own statements
	for _, r := range recs {
		statements += r.Stats().Statements
	}
	fmt.Fprintln(cmd.OutOrStdout(), recordSummary(done.Load(), failed.Load(), o.instances, elapsed, statements, firstErr))
	if firstErr != nil {
		return fmt.Errorf("record: %d failures not recorded, first error: %w", failed.Load(), firstErr)
	}
	return ctx.Err()
}

// windowCutOff reports whether err is a write the recorder cut off at its target window's start
// while the run goes on: a normal write must be done before its window opens (docs/schema.md), and
// on a loaded host or a cluster at LOCAL_QUORUM one can take longer than the write budget left it.
// record then tries the failure once more, as a service would retry a write that timed out; the
// recorder reads the clock again and writes into the next window. Should the first write have landed
// after all, the step is in two windows, and its execution markers see to it that it runs once.
func windowCutOff(run context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && run.Err() == nil
}

// recordSummary is record's last line: the rate and the cost of a recorded failure. With none
// recorded there is no cost to give (statements divided by zero failures): it says that every
// write failed, how many statements that took, and the first error.
func recordSummary(done, failed int64, instances int, elapsed time.Duration, statements uint64, firstErr error) string {
	if done == 0 && failed > 0 {
		return fmt.Sprintf("recorded none of %d failures across %d instances in %v: every write failed (%d statements sent); first error: %v",
			failed, instances, elapsed.Round(time.Millisecond), statements, firstErr)
	}
	return fmt.Sprintf("recorded %d failures (%d failed) across %d instances in %v: %.0f/s, %.3f statements per failure",
		done, failed, instances, elapsed.Round(time.Millisecond),
		float64(done)/elapsed.Seconds(), float64(statements)/float64(max(done, 1)))
}

// backdateBatch is how many failures one RecordAt call writes: the late protocol publishes the
// directory bottom-up once per call, so batching keeps an import near one statement per failure.
const backdateBatch = 1000

// runBackdatedImport writes every failure into the window after the one the clock showed
// --backdate ago: a window that is readable at once, written with the late protocol.
func runBackdatedImport(ctx context.Context, cmd *cobra.Command, o recordOptions, recs []*recorder.Recorder) error {
	start := time.Now()
	target, err := window.Of(wallclock.Now().Add(-o.backdate), o.ring.windowMinutes)
	if err != nil {
		return err
	}
	target = target.Next()
	var done int
	for i := 0; i < o.count && ctx.Err() == nil; {
		n := min(backdateBatch, o.count-i)
		rec := recs[(i/backdateBatch)%len(recs)]
		fs := make([]recorder.Failure, n)
		for j := range fs {
			fs[j] = recorder.Failure{TransactionID: fmt.Sprintf("%s%d", o.prefix, i+j), ImplType: o.implType, AllocationKey: fmt.Sprint((i + j) % 97)}
		}
		if err := rec.RecordAt(ctx, target, fs...); err != nil {
			return fmt.Errorf("record: %d of %d failures imported into %v, then: %w", done, o.count, target, err)
		}
		done += n
		i += n
	}
	elapsed := time.Since(start)
	var statements uint64
	for _, r := range recs {
		statements += r.Stats().Statements
	}
	fmt.Fprintf(cmd.OutOrStdout(), "imported %d failures into window %v across %d instances in %v: %.0f/s, %.3f statements per failure\n",
		done, target, len(recs), elapsed.Round(time.Millisecond), float64(done)/elapsed.Seconds(), float64(statements)/float64(max(done, 1)))
	return ctx.Err()
}

// clockSummary is the summary's line on the clock: the measured offset and whether it was trusted.
func clockSummary(s clockcheck.Status) string {
	if !s.Trusted {
		return fmt.Sprintf("clock: UNTRUSTED, %s", s.Reason)
	}
	return fmt.Sprintf("clock: offset %v (%d hosts measured), within the %v a process may be off", s.Estimate, s.Estimate.Hosts, s.Limit)
}
