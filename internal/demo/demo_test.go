package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/proctest"
)

// binary builds the retryring binary once for the package's tests (or takes $E2E_BIN).
func binary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("E2E_BIN"); b != "" {
		return b
	}
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "retryring")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := proc.Build(ctx, root, bin, false); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestDemoEndToEnd runs the whole demo in a short configuration: 600 failures imported into a
// past window (readable at once), a downstream that refuses the first calls with 503 for 3 s
// (so part of them is recorded again one window ahead, about a minute later), a worker killed
// with SIGKILL while it has a call under way and restarted, the leader killed and restarted.
// Nothing may be lost, nothing interleaved, and every process must be gone when Run returns.
// It asserts what the demo does, never how fast: each phase waits for the work it is about, so
// a slow machine, a kill or an election that keeps the workers away changes when, not what.
func TestDemoEndToEnd(t *testing.T) {
	bin := binary(t)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	ks := "t_demo_" + hex.EncodeToString(rnd[:])
	logDir := t.TempDir()
	if keep := os.Getenv(proctest.KeepLogsEnv); keep != "" && keep != "0" {
		var err error
		if logDir, err = os.MkdirTemp("", "retryring-demo-test-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("logs in %s (%s)", logDir, proctest.KeepLogsEnv)
	}
	keep := os.Getenv(proctest.KeepLogsEnv) != "" && os.Getenv(proctest.KeepLogsEnv) != "0"
	cfg := Config{
		Binary: bin, Cassandra: cassandratest.Addr(), Keyspace: ks, LogDir: logDir,
		Count: 600, Instances: 3, Backdate: 3 * time.Minute,
		WorkerConcurrency: 8, Duration503: 3 * time.Second,
		Schedule: Schedule{WorkerKill: time.Second, WorkerRestart: 2 * time.Second, LeaderKill: 3 * time.Second, LeaderRestart: 3 * time.Second},
		Display:  DisplayPlain, Timeout: 4 * time.Minute, Keep: keep,
	}
	if keep {
		cfg.WorkerArgs = []string{"--log-level", "debug"}
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	sum, err := Run(ctx, cfg, &out)
	defer func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if sum.Recorded != cfg.Count || sum.Lost != 0 || !sum.Drained {
		t.Errorf("recorded %d lost %d drained %v", sum.Recorded, sum.Lost, sum.Drained)
	}
	if sum.Done+sum.DeadLettered != sum.Recorded || sum.DoneAndDead != 0 {
		t.Errorf("done %d + dead-lettered %d != recorded %d (both %d)", sum.Done, sum.DeadLettered, sum.Recorded, sum.DoneAndDead)
	}
	if sum.Interleavings != 0 {
		t.Errorf("%d interleavings", sum.Interleavings)
	}
	if sum.Killed == "" || sum.InFlightAtKill == 0 || sum.ExecutedTwice > sum.Concurrency {
		t.Errorf("killed %q with %d executions under way, executed twice %d (bound %d); want a worker killed during an execution",
			sum.Killed, sum.InFlightAtKill, sum.ExecutedTwice, sum.Concurrency)
	}
	if sum.OutageCalls < outageRefusals || sum.OutageFor < cfg.Duration503 {
		t.Errorf("the outage refused %d calls over %v; want %d at least, over %v at least", sum.OutageCalls, sum.OutageFor, outageRefusals, cfg.Duration503)
	}
	if sum.Retried == 0 || len(sum.Windows) < 2 {
		t.Errorf("the 503 phase retried %d transactions into %d windows; want some, in a later window", sum.Retried, len(sum.Windows))
	}
	for _, w := range sum.Windows {
		if w.Pending != 0 || w.Recorded != w.Done+w.Retried+w.DeadLettered {
			t.Errorf("window %v not accounted for: %+v", w.Window, w)
		}
	}
	if lo := sum.Leftover; sum.LeftoverErr != nil || lo.Rows != lo.RowsNotOpen {
		t.Errorf("directory after the drain: %+v (%v)", lo, sum.LeftoverErr)
	}
	events := out.String()
	for _, want := range []string{"kill -9 worker", "kill -9 coordinator leader", "is the new leader", "restarted", "downstream recovered", "summary", "dropped"} {
		if !strings.Contains(events, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if left := processesMentioning(t, logDir, ks); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// processesMentioning lists the processes whose command line names any of the strings (Linux).
func processesMentioning(t *testing.T, needles ...string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil || len(cmdlines) == 0 {
		return nil
	}
	var out []string
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		for _, n := range needles {
			if strings.Contains(cmd, n) {
				out = append(out, filepath.Base(filepath.Dir(p))+": "+cmd)
				break
			}
		}
	}
	return out
}
