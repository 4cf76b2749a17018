package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	rslogger "github.com/rsocket/rsocket-go/logger"

	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/worker/leaseclient"
)

// timingSpec is one lease timing to run under, by name.
type timingSpec struct {
	name         string
	ttl, renewal time.Duration
	// tls: the run has TLS everywhere (benchTLS); its name ends in "+tls".
	tls bool
}

type options struct {
	workers       []int
	timings       []timingSpec
	binary        string
	steady        time.Duration
	settleBound   time.Duration
	renewBound    time.Duration
	poll          time.Duration
	coordArgs     []string
	skipRolling   bool
	maxRun        time.Duration
	keep          bool
	out           string
	binaryVersion string
	files         string // the file descriptor limits, for the report
	// cpuProfiles, when set, is where the leader's CPU profile of each steady phase is written
	// (the coordinators then run with --profiling).
	cpuProfiles string
	// keepalive is the lease clients' KEEPALIVE period; zero means the lease client's default.
	keepalive time.Duration
	// answerEvery is the lease clients' KeepaliveAnswerEvery; zero means the lease client's default.
	answerEvery int
}

func main() {
	var o options
	var workers, timings, oldTiming, newTiming, coordArgs, tlsModes string
	fs := flag.NewFlagSet("swarm", flag.ExitOnError)
	fs.StringVar(&workers, "workers", "200,1000", "swarm sizes to run, comma-separated (rings = workers / 10)")
	fs.StringVar(&timings, "timing", "old,new", "lease timings to run, comma-separated: old, new")
	fs.StringVar(&oldTiming, "old-timing", "3s/1s", "the old timing, TTL/renewal (--lease-ttl, --lease-renewal)")
	fs.StringVar(&newTiming, "new-timing", "10s/2s", "the new timing, TTL/renewal (the coordinator's defaults)")
	fs.StringVar(&tlsModes, "tls", "off", "TLS modes to run each timing in, comma-separated: off (plain TCP), on (TLS on RSocket, admin HTTP and Raft, mutual for workers and coordinators)")
	fs.StringVar(&o.binary, "binary", "", "retryring binary to run as coordinators (default: build ./cmd/retryring of this module); give an older build for a baseline")
	fs.StringVar(&coordArgs, "coordinator-args", "", "extra flags for every coordinator, space-separated")
	fs.DurationVar(&o.steady, "steady", 30*time.Second, "steady renewals measured before the leader kill")
	fs.DurationVar(&o.settleBound, "settle-bound", 3*time.Minute, "longest wait for every ring to settle (join storm, after each fault)")
	fs.DurationVar(&o.renewBound, "renew-bound", time.Minute, "longest wait, after a fault, for every worker to be renewed by another coordinator")
	fs.DurationVar(&o.poll, "poll", 200*time.Millisecond, "period of the polls of the leader's GET /v1/ring (each answer lists every member)")
	fs.BoolVar(&o.skipRolling, "skip-rolling", false, "skip the rolling restart")
	fs.DurationVar(&o.maxRun, "max-run", time.Hour, "stop the whole run after this long")
	fs.BoolVar(&o.keep, "keep", false, "keep the logs and data directories")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	fs.StringVar(&o.cpuProfiles, "cpu-profiles", "", "write the leader's CPU profile of each steady phase (plain runs; TLS runs are skipped) to this directory: leader-WORKERS-TIMING.pprof, for go tool pprof")
	fs.DurationVar(&o.keepalive, "keepalive", 0, "the lease clients' KEEPALIVE period (default: the lease client's, leaseclient.DefaultKeepalive); 200ms is protocol.md's earlier rule, for a baseline")
	fs.IntVar(&o.answerEvery, "answer-every", 0, "one KEEPALIVE in this many asks the coordinator for an answer (default: the lease client's, leaseclient.DefaultKeepaliveAnswerEvery); 1, every one, is the rule before 2026-12-07, for a baseline; the lease client refuses a negative one")
	_ = fs.Parse(os.Args[1:])

	for _, w := range strings.Split(workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 10 {
			benchkit.Fail(fmt.Errorf("-workers: %q is not a count of at least 10", w))
		}
		o.workers = append(o.workers, n)
	}
	specs := map[string]string{"old": oldTiming, "new": newTiming}
	for _, name := range strings.Split(timings, ",") {
		name = strings.TrimSpace(name)
		spec, ok := specs[name]
		if !ok {
			benchkit.Fail(fmt.Errorf("-timing: unknown %q (old, new)", name))
		}
		ts, err := parseTiming(name, spec)
		if err != nil {
			benchkit.Fail(err)
		}
		for _, mode := range strings.Split(tlsModes, ",") {
			switch strings.TrimSpace(mode) {
			case "off":
				o.timings = append(o.timings, ts)
			case "on":
				on := ts
				on.name, on.tls = ts.name+"+tls", true
				o.timings = append(o.timings, on)
			default:
				benchkit.Fail(fmt.Errorf("-tls: unknown %q (off, on)", mode))
			}
		}
	}
	o.coordArgs = strings.Fields(coordArgs)
	if o.steady <= 0 || o.settleBound <= 0 || o.renewBound <= 0 || o.poll <= 0 {
		benchkit.Fail(errors.New("-steady, -settle-bound, -renew-bound and -poll must be positive"))
	}
	if o.keepalive < 0 || o.keepalive > leaseclient.MaxKeepalive {
		benchkit.Fail(fmt.Errorf("-keepalive %v: want a period in (0, %v], or 0 for the default", o.keepalive, leaseclient.MaxKeepalive))
	}
	files, err := checkFiles(o.workers)
	if err != nil {
		benchkit.Fail(err)
	}
	o.files = files

	// rsocket-go logs every connection torn down, on its own global logger, to stderr: a leader kill
	// with a thousand clients would bury the progress lines. What matters of it reaches the lease
	// clients' own logs (clients.log of each run).
	rslogger.SetLogger(nil)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.maxRun)
	defer cancel()
	if err := run(ctx, o); err != nil {
		benchkit.Fail(err)
	}
}

func parseTiming(name, spec string) (timingSpec, error) {
	a, b, ok := strings.Cut(spec, "/")
	ttl, err1 := time.ParseDuration(a)
	renewal, err2 := time.ParseDuration(b)
	if !ok || err1 != nil || err2 != nil || ttl <= 0 || renewal <= 0 || renewal > ttl {
		return timingSpec{}, fmt.Errorf("-%s-timing %q: want TTL/renewal, such as 10s/2s, renewal at most the TTL", name, spec)
	}
	return timingSpec{name: name, ttl: ttl, renewal: renewal}, nil
}

// checkFiles makes sure the largest swarm's connections fit under the file descriptor limit:
// this process holds one socket per worker, the leader coordinator (a child, which raises its own
// soft limit to the hard one at start, as every Go program does) one per worker too.
func checkFiles(workers []int) (string, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "", fmt.Errorf("reading the file descriptor limit: %w", err)
	}
	most := 0
	for _, n := range workers {
		most = max(most, n)
	}
	need := uint64(most) + 256
	desc := fmt.Sprintf("file descriptor limit %d (hard %d); %d workers need about %d per process", lim.Cur, lim.Max, most, need)
	benchkit.Logf("%s", desc)
	if lim.Max < need {
		return desc, fmt.Errorf("the file descriptor limit (ulimit -Hn %d) is too low for %d workers: each needs a socket here and one in the leader; raise it to at least %d (ulimit -n %d)", lim.Max, most, need, need)
	}
	return desc, nil
}

// identify names the binary for the report: its `version` output where it has that subcommand,
// and always the start of its SHA-256, so that two runs can tell which build they measured.
func identify(ctx context.Context, path string) string {
	var parts []string
	if out, err := exec.CommandContext(ctx, path, "version").Output(); err == nil {
		parts = append(parts, strings.Join(strings.Fields(string(out)), " "))
	}
	if f, err := os.Open(path); err == nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err == nil {
			parts = append(parts, fmt.Sprintf("sha256 %x", h.Sum(nil)[:6]))
		}
		_ = f.Close()
	}
	return strings.Join(parts, ", ")
}

func run(ctx context.Context, o options) (err error) {
	m := benchkit.StartRun()
	dir, done, err := benchkit.TempDir("swarm-", o.keep, benchkit.Logf)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	if o.binary, err = benchkit.Binary(ctx, o.binary, dir, benchkit.Logf); err != nil {
		return err
	}
	o.binaryVersion = identify(ctx, o.binary)

	var results []*result
	var runErr error
	for _, n := range o.workers {
		for _, ts := range o.timings {
			if ctx.Err() != nil {
				break
			}
			benchkit.Logf("=== %d workers, %d rings, %s timing (TTL %v, renewal %v)", n, n/10, ts.name, ts.ttl, ts.renewal)
			r := &result{workers: n, rings: n / 10, timing: ts}
			sub := filepath.Join(dir, fmt.Sprintf("w%d-%s", n, ts.name))
			if err := runOne(ctx, o, sub, r); err != nil {
				r.note("stopped: %v", err)
				benchkit.Logf("%d workers, %s timing: %v", n, ts.name, err)
				runErr = errors.Join(runErr, err)
			}
			results = append(results, r)
		}
	}
	m.LoadEnd = benchkit.LoadAvg()
	report := render(m, o, results)
	fmt.Print(report)
	if o.out != "" {
		if werr := os.WriteFile(o.out, []byte(report), 0o644); werr != nil {
			return errors.Join(runErr, werr)
		}
	}
	return runErr
}
