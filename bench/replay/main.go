package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/deadletter"
	"github.com/retryring/retryring/recorder"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
)

func main() {
	var f benchkit.Flags
	f.Register(flag.CommandLine)
	dead := flag.Int("dead", 10000, "dead letters to replay")
	rate := flag.Float64("rate", 500, "replay rate per second (--rate of deadletters replay)")
	workers := flag.Int("workers", 3, "workers draining the replayed copies")
	baseline := flag.Bool("baseline-rate", false, "also run an unpaced replay (rate 0) first, same run")
	flag.Parse()
	ctx := context.Background()
	s, err := f.Connect(ctx)
	if err != nil {
		benchkit.Fail(err)
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	rates := []float64{*rate}
	if *baseline {
		rates = []float64{0, *rate}
	}
	stopped := false
	for _, r := range rates {
		res, err := run(ctx, &f, s, *dead, r, *workers)
		if err != nil {
			benchkit.Fail(err)
		}
		fmt.Println(res)
		stopped = stopped || res.stopped != nil
	}
	if stopped {
		os.Exit(1)
	}
}

type result struct {
	rate                  float64
	dead, replayed        int
	replayTime, drainTime time.Duration
	calls                 int
	notOnce               int
	// retried counts the statements the replay tried again after a transient failure, settled
	// the marks it read back at the serial level; stopped is why it stopped (nil: it did not).
	retried, settled int
	stopped          error
}

func (r result) String() string {
	label := fmt.Sprintf("--rate %v", r.rate)
	if r.rate == 0 {
		label = "--rate 0 (unpaced)"
	}
	line := fmt.Sprintf("%-20s %d dead letters: replayed %d in %v (%.0f/s); %d statements retried after a transient failure, %d marks settled by a serial read",
		label, r.dead, r.replayed, r.replayTime.Round(time.Millisecond), float64(r.replayed)/r.replayTime.Seconds(), r.retried, r.settled)
	if r.stopped != nil {
		return line + "; STOPPED: " + r.stopped.Error()
	}
	return line + fmt.Sprintf("; 0 stopped; every replayed step executed %v after the replay ended; %d calls; steps executed other than exactly once: %d",
		r.drainTime.Round(time.Second), r.calls, r.notOnce)
}

// counter is the downstream: Done for every call, counted by idempotency key.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *counter) Execute(_ context.Context, t worker.Task) worker.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[fmt.Sprintf("%s:%s:r%d", t.TransactionID, t.ImplType, t.Replay)]++
	return worker.Outcome{Kind: worker.Done, Status: 200}
}

func (c *counter) snapshot() (keys, calls int, notOnce int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		calls += n
		if n != 1 {
			notOnce++
		}
	}
	return len(c.calls), calls, notOnce
}

func run(ctx context.Context, f *benchkit.Flags, s *gocql.Session, n int, rate float64, workers int) (result, error) {
	res := result{rate: rate, dead: n}
	ks, err := benchkit.NewKeyspace(ctx, s, "replay")
	if err != nil {
		return res, err
	}
	defer f.DropKeyspace(s, ks)
	st, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1})
	if err != nil {
		return res, err
	}
	if err := writeDeadLetters(ctx, st, n); err != nil {
		return res, err
	}
	// Unchecked: a benchmark on one host, whose workers share this process's clock.
	rec, err := recorder.New(st, recorder.Config{InstanceID: "retryring-deadletters", UncheckedClock: true})
	if err != nil {
		return res, err
	}
	start := time.Now()
	rr, err := deadletter.Replay(ctx, st, rec, deadletter.Filter{Until: start}, deadletter.ReplayOptions{ID: "bench", Rate: rate})
	res.replayTime, res.replayed, res.retried, res.settled = time.Since(start), rr.Replayed, rr.Retried, rr.Settled
	if errors.Is(err, deadletter.ErrStopped) {
		res.stopped = err
		return res, nil
	}
	if err != nil {
		return res, err
	}
	ex := &counter{calls: map[string]int{}}
	scanners, err := benchkit.NewScanners(st, benchkit.StaticGuards(workers, time.Hour), ex, 100)
	if err != nil {
		return res, err
	}
	drainStart := time.Now()
	for deadline := drainStart.Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		benchkit.DrainAll(ctx, scanners, 50)
		if keys, _, _ := ex.snapshot(); keys >= rr.Replayed {
			break
		}
	}
	res.drainTime = time.Since(drainStart)
	_, res.calls, res.notOnce = ex.snapshot()
	if keys, _, _ := ex.snapshot(); keys < rr.Replayed {
		res.notOnce += rr.Replayed - keys // never executed
	}
	return res, nil
}

// writeDeadLetters stores n dead letters of n steps as a worker leaves them: the dead letter,
// the floor at the next replay generation, the DEAD_LETTERED state.
func writeDeadLetters(ctx context.Context, st *cassandra.Store, n int) error {
	now := time.Now().Add(-time.Minute)
	w, err := window.Of(now.Add(-time.Hour), 1)
	if err != nil {
		return err
	}
	jobs := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				id := fmt.Sprintf("tx-%06d", i)
				d := cassandra.DeadLetter{
					Bucket:      cassandra.BucketKey{Window: w, InstanceID: fmt.Sprintf("pod-%d", i%20)},
					Transaction: cassandra.Transaction{ID: id, ImplType: "Payment", AllocationKey: "k", Attempt: 10, AddedAt: w.Start()},
					LastStatus:  503, LastError: "503 Service Unavailable", DeadAt: now, WorkerID: "w0",
				}
				err := st.InsertDeadLetter(ctx, d)
				if err == nil {
					err = st.SetFloor(ctx, id, "Payment", cassandra.Copy{Replay: 1}, 0)
				}
				if err == nil {
					err = st.MarkDeadLettered(ctx, id, "Payment", "w0", now, 0)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := 0; i < n; i++ {
			select {
			case jobs <- i:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
