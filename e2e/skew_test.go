package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/wallclock"
	"github.com/retryring/retryring/window"
)

// Clock skews of the skewed drain: pairwise within maxClockOffset (1.6 s < 2 s), each within half
// of it from the host's clock, which is Cassandra's: the bound the product promises to work in.
// Each process checks its offset plus half a round trip to Cassandra against half the bound
// (1 s): 0.8 s leaves a loaded machine 200 ms of half round trip before it would stop.
const (
	recorderSkew = -800 * time.Millisecond
	workerSkew   = 800 * time.Millisecond
	// skewedWorker runs ahead; the other workers and the coordinators run on the host's clock.
	skewedWorker = "w2"
	// noSkewEnv set to 1 runs the same drain with every clock on the host's: the baseline of
	// docs/benchmarks.md's figure.
	noSkewEnv = "E2E_NO_SKEW"
)

// The late writer of the skewed drain: one failure at a time into windows whose time has passed,
// for about a minute, over a few instances, while the workers drain and Node-0 compacts those
// windows (as a `record --backdate` import that keeps going would).
// Each late write costs about ten statements, two of them compare-and-sets on the day's and the
// year's checkpoints, so the rate stays modest (a Cassandra shared with other suites times
// compare-and-sets out) and few late writes run at once (each bumps the checkpoints' version, and
// a writer gives up after eight compare-and-sets lost to the others).
const (
	lateCount       = 360
	lateRate        = 6
	lateConcurrency = 2
	lateInstances   = 4
	// regularCount failures are recorded into W+1 in real time meanwhile, at regularRate.
	regularCount = 600
	regularRate  = 10
)

// TestClockSkew builds the binary with the skewclock tag (package wallclock) and runs processes
// whose clocks differ by up to the bound; the binary of this run, built without the tag, must
// ignore the skew's environment variable.
func TestClockSkew(t *testing.T) {
	requireBinary(t, "coordinator", "worker", "record", "schema")
	skewed := filepath.Join(t.TempDir(), "retryring-skewclock")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err := proc.BuildPackage(ctx, root, "./cmd/retryring", skewed, os.Getenv("E2E_RACE") == "1", "skewclock")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ShippedBinaryIgnoresSkew", func(t *testing.T) { testShippedBinaryIgnoresSkew(t, skewed) })
	t.Run("SkewedDrainWithLateWriter", func(t *testing.T) { testSkewedDrainWithLateWriter(t, skewed) })
}

// testShippedBinaryIgnoresSkew: with the skew variable set to a day less a minute back, the
// shipped binary names the window of the host's clock for a backdated import and says nothing of a
// skew; the skewclock build says its clock runs that far off (whether it then imports, or refuses
// to on a clock beyond the bound, is not this test's business). Nothing is written (--count 0).
func testShippedBinaryIgnoresSkew(t *testing.T, skewed string) {
	const skew = -(23*time.Hour + 59*time.Minute)
	env := []string{fmt.Sprintf("%s=%v", wallclock.SkewEnv, skew)}
	run := func(name, binary string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return proc.Run(ctx, proc.Spec{Name: "record-" + name, Path: binary, LogDir: t.TempDir(), Env: env, Args: []string{
			"record", "--cassandra", cassandratest.Addr(), "--keyspace", "e2e_clock_unused",
			"--region", "e2e", "--cluster", "c1", "--service", "clock", "--window-minutes", "1",
			"--count", "0", "--backdate", "1m",
		}})
	}
	notice := fmt.Sprintf("wall clock runs %v off the host's", skew)

	before := time.Now()
	out, err := run("shipped", binary)
	after := time.Now()
	if err != nil {
		t.Fatalf("shipped binary with %s: %v\n%s", env[0], err, out)
	}
	var want []string // the window may turn between the two readings
	for _, at := range []time.Time{before, after} {
		w, err := window.Of(at.Add(-time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "into window "+w.Next().String())
	}
	if !strings.Contains(out, want[0]) && !strings.Contains(out, want[1]) {
		t.Errorf("shipped binary with %s: wrote %q, want %q (the host's clock)", env[0], out, want[0])
	}
	if strings.Contains(out, "wall clock runs") {
		t.Errorf("shipped binary with %s says its clock is skewed: %q", env[0], out)
	}

	if out, _ := run("skewclock", skewed); !strings.Contains(out, notice) {
		t.Errorf("skewclock binary with %s does not say %q: %q", env[0], notice, out)
	}
}

// testSkewedDrainWithLateWriter: the recorder runs 0.8 s behind the host's clock, worker w2 0.8 s
// ahead of it, everything else on it. A late writer imports one failure at a time into windows
// being drained (the instance rows it writes race the workers' checked deletes of them, and its
// window rows Node-0's) while regular recording into W+1 goes on. Then: every failure done or
// dead-lettered once, no duplicate (there is no fault to explain one), the directory drained.
func testSkewedDrainWithLateWriter(t *testing.T, skewed string) {
	recorderSkew, workerSkew := recorderSkew, workerSkew
	if os.Getenv(noSkewEnv) == "1" {
		recorderSkew, workerSkew = 0, 0
		t.Logf("%s=1: every clock on the host's (the baseline)", noSkewEnv)
	}
	o := shortOptions()
	o.Binary = skewed
	o.WorkerEnv = map[string][]string{skewedWorker: {fmt.Sprintf("%s=%v", wallclock.SkewEnv, workerSkew)}}
	s := newScenario(t, o)
	s.waitSettled()
	if w := s.c.Worker(skewedWorker); w == nil || (workerSkew != 0) != w.LogContains(fmt.Sprintf("wall clock runs %v off", workerSkew)) {
		t.Fatalf("worker %s does not say its clock runs %v off the host's", skewedWorker, workerSkew)
	}
	recorderEnv := []string{fmt.Sprintf("%s=%v", wallclock.SkewEnv, recorderSkew)}
	type result struct {
		b   proc.Batch
		err error
	}
	runs := []proc.RecordOptions{
		{Count: lateCount, Rate: lateRate, Instances: lateInstances, Backdate: backdate, Concurrency: lateConcurrency, Env: recorderEnv},
		{Count: regularCount, Rate: regularRate, Instances: shortInstances, Env: recorderEnv},
	}
	done := make(chan result, len(runs))
	s.mark("late writer (%d at %d/s into windows %v back) and regular recording (%d at %d/s into W+1) start, recorder at %v, %s at %v",
		lateCount, lateRate, backdate, regularCount, regularRate, recorderSkew, skewedWorker, workerSkew)
	for _, ro := range runs {
		go func() {
			b, err := s.c.Record(s.ctx(3*time.Minute), ro)
			done <- result{b, err}
		}()
	}
	for range runs {
		r := <-done
		if r.err != nil {
			// A failed late write may have published part of its path: which rows are recorded,
			// and which a half-published path strands, is unknown, so nothing can be checked.
			t.Fatalf("record: %v\n%s", r.err, r.b.Output)
		}
		if (recorderSkew != 0) != strings.Contains(r.b.Output, fmt.Sprintf("wall clock runs %v off", recorderSkew)) {
			t.Fatalf("the recorder does not say its clock runs %v off the host's: %s", recorderSkew, r.b.Output)
		}
		t.Logf("record: %s", r.b.Output)
		s.batches = append(s.batches, r.b)
	}
	s.mark("recording done")
	s.waitDrained(drainWait)
	s.check()
}
