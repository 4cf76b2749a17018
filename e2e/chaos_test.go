package e2e

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/downstream"
	"github.com/retryring/retryring/internal/proc"
)

// Shape of the long chaos run (E2E_LONG=1, `make chaos`). E2E_CHAOS_DURATION and
// E2E_CHAOS_FAILURES shorten it for trying the harness out (the figures need the defaults), and
// E2E_CHAOS_SKIP=cassandra leaves Cassandra alone while others use it; E2E_CHAOS_DRAIN_WAIT
// bounds the final wait for the drain.
const (
	chaosMinDuration = 5 * time.Minute
	chaosMinFailures = 100_000
	chaosFaultEvery  = 20 * time.Second
	chaosDrainWait   = 30 * time.Minute
	chaosImport      = 6000 // failures per backdated import
	chaosLiveChunk   = 3000 // failures per real-time record run
	chaosLiveRate    = 150  // per second
)

// errSkipped is an operation of the schedule that was configured away.
var errSkipped = errors.New("skipped")

// TestChaos records at least 100,000 failures over at least five minutes, half imported into past
// windows and half written into W+1 in real time, while faults hit on a schedule: worker SIGKILL,
// worker SIGSTOP past its lease, coordinator leader SIGKILL, worker SIGTERM, both followers
// down, Cassandra SIGKILL, a worker added, the downstream answering 503 for a while. Then it
// waits for the drain and prints the figures for docs/benchmarks.md.
func TestChaos(t *testing.T) {
	if os.Getenv("E2E_LONG") != "1" {
		t.Skip("the long chaos run: E2E_LONG=1 (make chaos)")
	}
	node := managedCassandra(t)
	minDuration, minFailures := chaosMinDuration, chaosMinFailures
	if d, err := time.ParseDuration(os.Getenv("E2E_CHAOS_DURATION")); err == nil {
		minDuration = d
	}
	if n, err := strconv.Atoi(os.Getenv("E2E_CHAOS_FAILURES")); err == nil {
		minFailures = n
	}
	skipCassandra := os.Getenv("E2E_CHAOS_SKIP") == "cassandra"
	drainWait := chaosDrainWait
	if d, err := time.ParseDuration(os.Getenv("E2E_CHAOS_DRAIN_WAIT")); err == nil {
		drainWait = d
	}
	o := proc.Options{
		Workers: 4, Concurrency: 16,
		Downstream: downstream.Config{Latency: 5 * time.Millisecond, Jitter: 15 * time.Millisecond, PermanentFraction: 0.01},
	}
	s := newScenario(t, o)
	t.Cleanup(func() { node.restore(t) })
	s.waitSettled()
	sampler := s.c.SampleLeases(100 * time.Millisecond)
	start := s.mark("chaos: start")

	// Recording runs beside the faults. A Cassandra outage takes the write side of cassLock, so
	// that no record run is cut off by it: a run that fails leaves it unknown which of its
	// failures were recorded.
	var cassLock sync.RWMutex
	var recMu sync.Mutex
	var recErrs []string
	var recorded int
	stopRecording := make(chan struct{})
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		for i := 0; ; i++ {
			select {
			case <-stopRecording:
				return
			default:
			}
			ro := proc.RecordOptions{Count: chaosImport, Instances: 6, Backdate: backdate}
			if i%2 == 1 {
				ro = proc.RecordOptions{Count: chaosLiveChunk, Instances: 6, Rate: chaosLiveRate}
			}
			cassLock.RLock()
			b, err := s.c.Record(s.ctx(10*time.Minute), ro)
			cassLock.RUnlock()
			recMu.Lock()
			if err != nil {
				recErrs = append(recErrs, fmt.Sprintf("%s: %v", b.Prefix, err))
				s.uncertain = append(s.uncertain, b)
			} else {
				s.batches = append(s.batches, b)
				recorded += b.Count
			}
			recMu.Unlock()
		}
	}()
	enough := func() bool {
		recMu.Lock()
		defer recMu.Unlock()
		return recorded >= minFailures && time.Since(start) >= minDuration
	}

	added := false
	var lastFault time.Time
	var done []string // the operations that did something, in order
	var failovers []time.Duration
	type opAt struct {
		name string
		at   time.Time
	}
	var opTimes []opAt
	ops := []struct {
		name string
		do   func() error
	}{
		{"worker SIGKILL", func() error { return s.killWorker(s.busyWorker(0), time.Second) }},
		{"worker SIGSTOP", func() error { return s.freezeWorker(s.busyWorker(0), 2*timing.TTL+2*time.Second) }},
		{"leader SIGKILL", func() error {
			took, err := s.killLeader()
			failovers = append(failovers, took)
			return err
		}},
		{"worker SIGTERM", func() error { return s.termWorker(s.busyWorker(0)) }},
		{"quorum loss", func() error { return s.quorumLoss(3 * time.Second) }},
		// The workers stay up through the outage; /readyz is 503 from their first failed check
		// (the workers' view of coverage counts that as a gap), and an outage past their
		// --cassandra-lost-after (30 s) has each give its ranges back and rejoin when
		// Cassandra is back (waitWorkersBack).
		{"Cassandra SIGKILL", func() error {
			if skipCassandra {
				s.mark("chaos: Cassandra kill skipped (E2E_CHAOS_SKIP)")
				return errSkipped
			}
			cassLock.Lock()
			defer cassLock.Unlock()
			s.outage(node, "kill", false)
			s.waitWorkersBack(2 * time.Minute)
			return nil
		}},
		{"worker added or downstream 503", func() error {
			if !added {
				added = true
				_, err := s.c.AddWorker(s.ctx(time.Minute))
				return err
			}
			s.ds.SetUnavailable(true)
			s.mark("downstream unavailable")
			time.Sleep(10 * time.Second)
			s.ds.SetUnavailable(false)
			s.mark("downstream available")
			return nil
		}},
	}
	// Faults go on while failures are being recorded, until both minimums are reached; then the
	// recording stops (its last run ends) and the drain is timed from the last fault.
	for i := 0; !enough(); i++ {
		time.Sleep(chaosFaultEvery)
		op := ops[i%len(ops)]
		opTimes = append(opTimes, opAt{op.name, s.mark("chaos: %s", op.name)})
		err := op.do()
		switch {
		case errors.Is(err, errSkipped):
			opTimes = opTimes[:len(opTimes)-1]
			continue
		case err != nil:
			close(stopRecording)
			<-recDone
			t.Fatalf("chaos: %s: %v", op.name, err)
		}
		lastFault = time.Now()
		done = append(done, op.name)
	}
	s.mark("chaos: last fault over; stopping the recording")
	close(stopRecording)
	<-recDone
	recordingEnd := s.mark("chaos: recording done")
	s.reconnect()
	drained := s.waitDrained(drainWait)
	rep := sampler.Stop()
	v := s.check()

	// Attribute each lease gap to the last operation that began before it.
	cause := func(g proc.Gap) string {
		name := "no fault"
		for _, o := range opTimes {
			if !o.at.After(g.From) {
				name = o.name
			}
		}
		return name
	}
	perFault := func(c proc.Coverage) string {
		longest := map[string]time.Duration{}
		for _, g := range c.Gaps {
			longest[cause(g)] = max(longest[cause(g)], g.Length())
		}
		var out []string
		for _, op := range ops {
			if d, ok := longest[op.name]; ok {
				out = append(out, fmt.Sprintf("%s %v", op.name, d.Round(time.Millisecond)))
			}
		}
		if d, ok := longest["no fault"]; ok {
			out = append(out, fmt.Sprintf("no fault %v", d.Round(time.Millisecond)))
		}
		return strings.Join(out, "; ")
	}
	longestOf := func(c proc.Coverage) string {
		return fmt.Sprintf("%v, from %s (after %s)", c.LongestGap.Round(time.Millisecond),
			c.LongestGapFrom.Format("15:04:05.000"), cause(proc.Gap{From: c.LongestGapFrom}))
	}
	worst := append([]proc.Gap(nil), rep.Workers.Gaps...)
	sort.Slice(worst, func(i, j int) bool { return worst[i].Length() > worst[j].Length() })
	for _, g := range worst[:min(len(worst), 8)] {
		t.Logf("lease gap (workers' view) %v from %s to %s, after %s: %d range(s), %.1f%% of the ring, last held by %v",
			g.Length().Round(time.Millisecond), g.From.Format("15:04:05.000"), g.To.Format("15:04:05.000"), cause(g),
			len(g.Ranges), g.Ranges.Fraction()*100, g.Holders)
	}
	lines := []string{
		fmt.Sprintf("recorded:                %d failures in %v (%d record runs failed, their ids not counted: %v)",
			v.acc.recorded, recordingEnd.Sub(start).Round(time.Second), len(recErrs), recErrs),
		fmt.Sprintf("done / dead-lettered:    %d / %d", v.acc.done, v.acc.deadLettered),
		fmt.Sprintf("lost:                    %d", len(v.acc.lost)),
		fmt.Sprintf("executed twice:          %d done twice and %d refused twice (explained by a fault: %d, unexplained: %d) of %d executions",
			len(v.duplicates), len(v.refusals), len(v.explained), len(v.unexplained), v.executions),
		fmt.Sprintf("interleavings:           %d", len(s.ds.Interleavings())),
		fmt.Sprintf("longest ring part without a usable lease, by the workers' own answers: %s; %d gaps",
			longestOf(rep.Workers), len(rep.Workers.Gaps)),
		fmt.Sprintf("  longest such gap after each kind of fault: %s", perFault(rep.Workers)),
		fmt.Sprintf("longest ring part without a usable lease, by the leader's view: %s; %d gaps",
			longestOf(rep.Leader), len(rep.Leader.Gaps)),
		fmt.Sprintf("  longest such gap after each kind of fault: %s", perFault(rep.Leader)),
		fmt.Sprintf("lease samples:           %d, %d without a leader", rep.Samples, rep.Failed),
		fmt.Sprintf("leader failovers (observed): %v", failovers),
		fmt.Sprintf("faults:                  %d (%s), the last over at %s", len(done), strings.Join(done, ", "), lastFault.Format("15:04:05")),
		fmt.Sprintf("time to drain after the last fault: %v (after the recording ended: %v)",
			drained.Sub(lastFault).Round(time.Second), drained.Sub(recordingEnd).Round(time.Second)),
	}
	report := "chaos report\n  " + strings.Join(lines, "\n  ")
	t.Log(report)
	fmt.Println(report)
}
