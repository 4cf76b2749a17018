package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/bench/leaseprobe/event"
	"github.com/retryring/retryring/internal/flaglist"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/worker/leaseclient"
)

// leaveTimeout bounds Leave; past it the ranges become free at expiry anyway.
const leaveTimeout = 5 * time.Second

// runStopWait bounds the wait for Run to return after Leave or a cancel.
const runStopWait = 2 * time.Second

func main() {
	os.Exit(run())
}

func run() int {
	var workerID, coordinators, logLevel string
	var backoffMax time.Duration
	var ring lease.RingKey
	fs := flag.NewFlagSet("leaseprobe", flag.ExitOnError)
	fs.StringVar(&workerID, "worker-id", "", "worker id in the ring (required)")
	fs.StringVar(&coordinators, "coordinators", "127.0.0.1:7878", "coordinator RSocket addresses, comma-separated")
	fs.StringVar(&ring.Region, "region", "bench", "ring region")
	fs.StringVar(&ring.Cluster, "cluster", "c1", "ring cluster")
	fs.StringVar(&ring.Service, "service", "orders", "ring service")
	fs.StringVar(&logLevel, "log-level", "warn", "level of the lease client's log lines copied to stderr")
	fs.DurationVar(&backoffMax, "backoff-max", 0, "the lease client's Backoff.Max (0: its default)")
	_ = fs.Parse(os.Args[1:])
	level, err := zerolog.ParseLevel(logLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaseprobe: -log-level: %v\n", err)
		return 2
	}

	out := &emitter{w: os.Stdout, workerID: workerID}
	tap := &logTap{out: os.Stderr, min: level, onConnect: out.connected}
	client, err := leaseclient.New(leaseclient.Config{
		WorkerID: workerID, Ring: ring, Coordinators: flaglist.Split(coordinators),
		// Debug, whatever -log-level says: the tap needs the "connected" lines.
		Logger:  zerolog.New(tap).Level(zerolog.DebugLevel).With().Timestamp().Logger(),
		OnLease: out.lease,
		Backoff: leaseclient.Backoff{Max: backoffMax},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaseprobe: %v\n", err)
		return 2
	}
	out.incarnation = client.Incarnation()
	out.emit(event.Event{Kind: event.Start, Pid: os.Getpid()})

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- client.Run(ctx) }()

	select {
	case err := <-runDone:
		out.emit(event.Event{Kind: event.Exit, Error: errText(err)})
		return 1
	case <-sigs:
	}
	out.emit(event.Event{Kind: event.LeaveStart})
	lctx, lcancel := context.WithTimeout(context.Background(), leaveTimeout)
	err = client.Leave(lctx)
	lcancel()
	out.emit(event.Event{Kind: event.LeaveDone, Error: errText(err)})
	cancel()
	select {
	case err := <-runDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			out.emit(event.Event{Kind: event.Exit, Error: errText(err)})
		}
	case <-time.After(runStopWait):
	}
	out.emit(event.Event{Kind: event.Exit})
	if err != nil {
		return 1
	}
	return 0
}

// emitter writes events, one line per write so that lines of stdout and stderr sharing one file
// never interleave inside a line.
type emitter struct {
	w           io.Writer
	workerID    string
	incarnation string

	mu   sync.Mutex
	addr string // the coordinator address of the current connection
}

func (e *emitter) emit(ev event.Event) {
	if ev.AtNs == 0 {
		ev.AtNs = time.Now().UnixNano()
	}
	ev.WorkerID, ev.Incarnation = e.workerID, e.incarnation
	b, err := json.Marshal(ev)
	if err != nil {
		return // every field marshals; nothing to report it to but the stream itself
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// lease is the client's OnLease hook: it runs on the connection's read goroutine right after the
// guard installed l, so the timestamp is the install time (to the microsecond).
func (e *emitter) lease(l lease.Lease) {
	ev := event.FromLease(l, time.Now())
	e.mu.Lock()
	ev.CoordinatorAddr = e.addr
	e.mu.Unlock()
	e.emit(ev)
}

func (e *emitter) connected(addr string) {
	e.mu.Lock()
	e.addr = addr
	e.mu.Unlock()
	e.emit(event.Event{Kind: event.Connected, CoordinatorAddr: addr})
}

// logTap receives the lease client's JSON log lines: it learns the coordinator address of each new
// connection and copies lines at or above min to out.
type logTap struct {
	out       io.Writer
	min       zerolog.Level
	onConnect func(addr string)
}

// connectedMsg is the message the lease client logs once per connection (worker/leaseclient/run.go).
const connectedMsg = "connected"

func (t *logTap) Write(p []byte) (int, error) {
	var line struct {
		Level   string `json:"level"`
		Message string `json:"message"`
		Addr    string `json:"coordinator_addr"`
	}
	if json.Unmarshal(p, &line) != nil { // not a JSON log line: pass it through as it is
		_, _ = t.out.Write(p)
		return len(p), nil //nolint:nilerr // a line that is not JSON is passed through, not an error
	}
	if line.Message == connectedMsg && line.Addr != "" {
		t.onConnect(line.Addr)
	}
	if lvl, err := zerolog.ParseLevel(line.Level); err != nil || lvl >= t.min {
		_, _ = t.out.Write(p)
	}
	return len(p), nil
}

func errText(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	return err.Error()
}
