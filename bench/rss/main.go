package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryring/retryring/cassandra"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/benchkit"
	"github.com/retryring/retryring/testkit/procstat"
)

// childReport is what a child prints as its last line of output.
type childReport struct {
	Executed    int64
	Seconds     float64
	Cycles      int
	PeakRSSKiB  int64   // VmHWM of /proc/self/status just before exit
	PeakHeapMiB float64 // highest HeapInuse sampled every 20 ms
	SysMiB      float64 // runtime.MemStats.Sys at the end
	NumGC       uint32
}

func main() {
	if err := run(); err != nil {
		benchkit.Fail(err)
	}
}

// run is main with its deferred cleanups (the keyspace drop) run on every error.
func run() error {
	var kit benchkit.Flags
	fs := flag.NewFlagSet("rss", flag.ExitOnError)
	kit.Register(fs)
	child := fs.Bool("child", false, "internal: run as the draining worker process")
	keyspace := fs.String("keyspace", "", "internal: the child's keyspace")
	service := fs.String("service", benchkit.Ring.Service, "internal: the child's service")
	windows := fs.Int("windows", 3, "one-minute windows in the history")
	instances := fs.Int("instances", 5, "instances writing into each window")
	rows := fs.Int("rows", 10_000, "failures per instance per window (one bucket each)")
	concurrency := fs.Int("concurrency", 100, "executions in flight in the worker")
	page := fs.Int("page", 500, "rows per page of a bucket")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *child {
		return runChild(ctx, &kit, *keyspace, *service, *concurrency, *page)
	}

	s, err := kit.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	benchkit.Describe(ctx, s).Print(os.Stdout, benchkit.Command())
	ks, err := benchkit.NewKeyspace(ctx, s, "rss")
	if err != nil {
		return err
	}
	defer kit.DropKeyspace(s, ks)
	store, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: benchkit.Ring, WindowMinutes: 1, PageSize: *page})
	if err != nil {
		return err
	}
	hist := &benchkit.History{Store: store, Instances: *instances, RowsPerInstance: *rows,
		First: benchkit.PastWindow(time.Duration(*windows+10) * time.Minute)}
	t0 := time.Now()
	n, _, err := hist.Write(ctx, *windows)
	if err != nil {
		return err
	}
	fmt.Printf("\nhistory: %d failures in %d windows × %d instances × %d (one bucket each), written in %.1f s; keyspace %s\n\n",
		n, *windows, *instances, *rows, time.Since(t0).Seconds(), ks)

	fmt.Println("| process | executed | drain s | VmHWM at exit MiB | VmHWM polled by the parent MiB | peak Go heap in use MiB | Go Sys MiB | GCs | load avg after |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---|")
	args := []string{"-child", "-cassandra", kit.Addr, "-keyspace", ks, "-concurrency", fmt.Sprint(*concurrency), "-page", fmt.Sprint(*page)}
	for _, run := range []struct {
		name    string
		service string
	}{
		{"baseline: idle worker, empty directory", "idle-service"},
		{fmt.Sprintf("worker draining %d failures, concurrency %d", n, *concurrency), benchkit.Ring.Service},
	} {
		rep, polled, err := spawn(ctx, append(args, "-service", run.service))
		if err != nil {
			return err
		}
		name := run.name
		if run.service == benchkit.Ring.Service && rep.Executed != int64(n) {
			name += fmt.Sprintf(" (INCOMPLETE: %d of %d executed, see stderr)", rep.Executed, n)
		}
		fmt.Printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %s |\n", name, rep.Executed, rep.Seconds,
			float64(rep.PeakRSSKiB)/1024, float64(polled)/1024, rep.PeakHeapMiB, rep.SysMiB, rep.NumGC, benchkit.LoadAvg())
	}
	return nil
}

// spawn runs this program as a child and returns its report and the highest VmHWM (KiB) read
// from /proc/<pid>/status while it ran. (getrusage's ru_maxrss is no use here: Go starts
// children with vfork, and Linux then charges the parent's peak RSS to the child at exec.)
func spawn(ctx context.Context, args []string) (childReport, int64, error) {
	self, err := os.Executable()
	if err != nil {
		return childReport{}, 0, err
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return childReport{}, 0, err
	}
	done := make(chan struct{})
	var peak atomic.Int64
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kib, err := procstat.PeakRSSKiB(cmd.Process.Pid); err == nil && kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	if err != nil {
		return childReport{}, 0, fmt.Errorf("child %v: %w", args, err)
	}
	var rep childReport
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		return childReport{}, 0, fmt.Errorf("child report %q: %w", lines[len(lines)-1], err)
	}
	return rep, peak.Load(), nil
}

// runChild is the worker process: drain the service's directory, then report.
func runChild(ctx context.Context, kit *benchkit.Flags, ks, service string, concurrency, page int) error {
	var peakHeap atomic.Uint64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()

	s, err := kit.Connect(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	ring := benchkit.Ring
	ring.Service = service
	store, err := cassandra.NewStore(s, cassandra.StoreConfig{Keyspace: ks, Ring: ring, WindowMinutes: 1, PageSize: page})
	if err != nil {
		return err
	}
	guard := lease.NewGuard(lease.SystemClock{}, 100*time.Millisecond)
	guard.Set(lease.Lease{WorkerID: benchkit.WorkerID(0), Ring: ring, NodeIndex: 0, NodeCount: 1, Epoch: 1,
		Ranges: lease.Ranges{lease.FullRing}, TTL: 24 * time.Hour, ValidFrom: time.Now()})
	exec := &benchkit.NoopExecutor{}
	scanners, err := benchkit.NewScanners(store, []*lease.Guard{guard}, exec, concurrency)
	if err != nil {
		return err
	}
	dr := benchkit.DrainAll(ctx, scanners, 50)
	for _, e := range dr.Errors {
		fmt.Fprintln(os.Stderr, "cycle error:", e)
	}
	close(stopSampling)
	<-sampled
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep := childReport{
		Executed: exec.Calls.Load(), Seconds: dr.Elapsed.Seconds(), Cycles: dr.Cycles, PeakRSSKiB: selfPeakRSSKiB(),
		PeakHeapMiB: float64(peakHeap.Load()) / (1 << 20), SysMiB: float64(ms.Sys) / (1 << 20), NumGC: ms.NumGC,
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// selfPeakRSSKiB is this process's VmHWM, -1 when it cannot be read.
func selfPeakRSSKiB() int64 {
	kib, err := procstat.PeakRSSKiB(os.Getpid())
	if err != nil {
		return -1
	}
	return kib
}
