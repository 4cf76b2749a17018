package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/window"
)

type options struct {
	instances, count, goroutines, rounds, windowMinutes int
}

// result is one run of one writer.
type result struct {
	name       string
	failures   uint64
	statements uint64
	errors     uint64
	elapsed    time.Duration
	latencies  []time.Duration
	load       string
}

func main() {
	if err := run(); err != nil {
		benchkit.Fail(err)
	}
}

// run is main with its deferred cleanups (the keyspace drop) run on every error.
func run() error {
	var kit benchkit.Flags
	var o options
	fs := flag.NewFlagSet("recorder", flag.ExitOnError)
	kit.Register(fs)
	fs.IntVar(&o.instances, "instances", 10, "recording instances (each with its own session)")
	fs.IntVar(&o.count, "count", 60_000, "failures recorded in all, per run")
	fs.IntVar(&o.goroutines, "goroutines", 16, "concurrent Record calls per instance")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds of (ours, naive), the order alternating")
	fs.IntVar(&o.windowMinutes, "window-minutes", 1, "window length L")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := kit.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	ks, err := benchkit.NewKeyspace(ctx, s, "recorder")
	if err != nil {
		return err
	}
	defer kit.DropKeyspace(s, ks)

	// One session per instance, as separate processes would have.
	sessions := make([]*gocql.Session, o.instances)
	for i := range sessions {
		if sessions[i], err = kit.Connect(ctx); err != nil {
			return err
		}
		defer sessions[i].Close()
	}

	var results []result
	for round := range o.rounds {
		order := []string{"ours", "naive"}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			ring := benchkit.Ring
			ring.Service = fmt.Sprintf("rec-%s-%d", name, round)
			var r result
			var err error
			if name == "ours" {
				r, err = runOurs(ctx, sessions, ks, ring, o)
			} else {
				r, err = runNaive(ctx, sessions, ks, ring, o)
			}
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}

	fmt.Printf("\n%d instances × %d goroutines record %d failures in all into W+1 (L = %d min), keyspace %s.\n\n",
		o.instances, o.goroutines, o.count, o.windowMinutes, ks)
	fmt.Println("| writer | failures | errors | seconds | failures/s | statements | statements/failure | Record p50 ms | p99 ms | load avg after |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range results {
		slices.Sort(r.latencies)
		fmt.Printf("| %s | %d | %d | %.1f | %.0f | %d | %.4f | %.1f | %.1f | %s |\n", r.name, r.failures, r.errors,
			r.elapsed.Seconds(), float64(r.failures)/r.elapsed.Seconds(), r.statements,
			float64(r.statements)/float64(max(r.failures, 1)), ms(pct(r.latencies, 50)), ms(pct(r.latencies, 99)), r.load)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// drive runs record(instance, n) count times in all, spread evenly over the instances, with
// o.goroutines calls in flight per instance, and times each call.
func drive(ctx context.Context, o options, record func(ctx context.Context, instance int, n int64) error) (elapsed time.Duration, errs uint64, lat []time.Duration) {
	var errCount atomic.Uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for in := range o.instances {
		quota := int64(o.count / o.instances)
		if in < o.count%o.instances {
			quota++
		}
		var next atomic.Int64
		for range o.goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := make([]time.Duration, 0, quota/int64(o.goroutines)+1)
				for {
					n := next.Add(1) - 1
					if n >= quota || ctx.Err() != nil {
						break
					}
					t0 := time.Now()
					if err := record(ctx, in, n); err != nil {
						if errCount.Add(1) <= 3 {
							fmt.Fprintln(os.Stderr, "record:", err)
						}
						continue
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return time.Since(start), errCount.Load(), lat
}

func instanceID(i int) string { return fmt.Sprintf("pod-%02d", i) }

func runOurs(ctx context.Context, sessions []*gocql.Session, ks string, ring lease.RingKey, o options) (result, error) {
	recs := make([]*recorder.Recorder, len(sessions))
	for i, s := range sessions {
		st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: o.windowMinutes})
		if err != nil {
			return result{}, err
		}
		// Unchecked: a benchmark of the write path on one host; a monitor would add its probes to the figures.
		if recs[i], err = recorder.New(st, recorder.Config{InstanceID: instanceID(i), UncheckedClock: true}); err != nil {
			return result{}, err
		}
	}
	elapsed, errs, lat := drive(ctx, o, func(ctx context.Context, in int, n int64) error {
		_, err := recs[in].Record(ctx, recorder.Failure{
			TransactionID: fmt.Sprintf("%s-%s-%07d", ring.Service, instanceID(in), n), ImplType: "Payment", AllocationKey: "k",
		})
		return err
	})
	r := result{name: "recorder (ours)", elapsed: elapsed, errors: errs, latencies: lat, load: benchkit.LoadAvg()}
	for _, rec := range recs {
		st := rec.Stats()
		r.failures += st.Failures
		r.statements += st.Statements
	}
	return r, nil
}

// naiveWriter writes the five tiers for every failure, top-down, into the same W+1 target the
// recorder picks (with the same 250 ms write budget), and counts buckets the same way.
type naiveWriter struct {
	store   *cassandra.Store
	id      string
	length  int
	mu      sync.Mutex
	counter map[window.Window]int
}

func (w *naiveWriter) record(ctx context.Context, txID string) error {
	now := time.Now()
	target, err := window.WriteTarget(now, w.length)
	if err != nil {
		return err
	}
	if target.Start().Sub(now) < recorder.DefaultWriteBudget {
		target = target.Next()
	}
	w.mu.Lock()
	n := w.counter[target]
	w.counter[target] = n + 1
	w.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, target.Start())
	defer cancel()
	key := cassandra.BucketKey{Window: target, InstanceID: w.id, Bucket: n / recorder.DefaultBucketSize}
	steps := []func() error{
		func() error { return w.store.InsertDay(ctx, target.Day) },
		func() error { return w.store.InsertWindow(ctx, target) },
		func() error { return w.store.InsertInstance(ctx, target, w.id) },
		func() error { return w.store.InsertBucket(ctx, target, w.id, key.Bucket) },
		func() error {
			return w.store.InsertTransaction(ctx, key, cassandra.Transaction{ID: txID, AddedAt: now, ImplType: "Payment", AllocationKey: "k"})
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func runNaive(ctx context.Context, sessions []*gocql.Session, ks string, ring lease.RingKey, o options) (result, error) {
	writers := make([]*naiveWriter, len(sessions))
	for i, s := range sessions {
		st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: o.windowMinutes})
		if err != nil {
			return result{}, err
		}
		writers[i] = &naiveWriter{store: st.WithOwnCounter(), id: instanceID(i), length: o.windowMinutes, counter: map[window.Window]int{}}
	}
	var ok atomic.Uint64
	elapsed, errs, lat := drive(ctx, o, func(ctx context.Context, in int, n int64) error {
		err := writers[in].record(ctx, fmt.Sprintf("%s-%s-%07d", ring.Service, instanceID(in), n))
		if err == nil {
			ok.Add(1)
		}
		return err
	})
	r := result{name: "naive: five tiers per failure", elapsed: elapsed, errors: errs, latencies: lat, load: benchkit.LoadAvg(), failures: ok.Load()}
	for _, w := range writers {
		r.statements += w.store.Statements()
	}
	return r, nil
}
