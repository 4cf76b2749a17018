package main

import (
	"github.com/retryring/retryring/wallclock"

	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/worker/leaseclient"
)

// baselineClientFlag makes this binary a baseline client: `ringbench -baseline-client addr id`.
const baselineClientFlag = "-baseline-client"

// baseline measures rsocket-go's own detection of a silent client: a plain rsocket.Receive() TCP
// server on loopback, with no cap on its connections' read deadline, learns that a SIGSTOPped client
// is gone only when OnClose fires. Its clients are this binary in client mode, as separate processes
// (a process must be stopped, not a goroutine), keeping alive exactly as the lease client does.
type baseline struct {
	dir     string
	self    string // this executable
	clients int
	bound   time.Duration

	mu        sync.Mutex
	connected map[string]time.Time
	closed    map[string]time.Time
	changed   chan struct{}
}

// baselineResult is what a baseline run measured.
type baselineResult struct {
	vals     []time.Duration
	timeouts int
	err      error
}

func (b *baseline) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// run starts the server and the clients, stops every client once all are connected and keeping
// alive, and waits (at most bound) for the server to notice each.
func (b *baseline) run(ctx context.Context) (res baselineResult) {
	b.connected, b.closed, b.changed = map[string]time.Time{}, map[string]time.Time{}, make(chan struct{}, 1)
	addr, err := proc.FreeAddr()
	if err != nil {
		return baselineResult{err: err}
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	started := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- rsocket.Receive().
			OnStart(func() { close(started) }).
			Acceptor(func(_ context.Context, setup payload.SetupPayload, socket rsocket.CloseableRSocket) (rsocket.RSocket, error) {
				id := setup.DataUTF8()
				b.mu.Lock()
				b.connected[id] = time.Now()
				b.mu.Unlock()
				socket.OnClose(func(error) {
					b.mu.Lock()
					if _, ok := b.closed[id]; !ok {
						b.closed[id] = time.Now()
					}
					b.mu.Unlock()
					b.signal()
				})
				b.signal()
				return rsocket.NewAbstractSocket(), nil
			}).
			Transport(rsocket.TCPServer().SetAddr(addr).Build()).
			Serve(sctx)
	}()
	select {
	case <-started:
	case err := <-served:
		return baselineResult{err: fmt.Errorf("baseline server: %w", err)}
	case <-time.After(10 * time.Second):
		return baselineResult{err: fmt.Errorf("baseline server did not start")}
	}

	procs := make(map[string]*proc.Process, b.clients)
	defer func() {
		for _, p := range procs {
			_ = p.Kill9() // SIGKILL ends a stopped process too
		}
	}()
	for i := range b.clients {
		id := fmt.Sprintf("baseline-%d", i+1)
		p, err := proc.Launch(proc.Spec{Name: id, Path: b.self, Args: []string{baselineClientFlag, addr, id}, LogDir: b.dir})
		if err != nil {
			return baselineResult{err: err}
		}
		procs[id] = p
	}
	if !b.waitFor(ctx, 30*time.Second, func() bool { return len(b.connected) == b.clients }) {
		return baselineResult{err: fmt.Errorf("baseline: not every one of %d clients connected", b.clients)}
	}
	// Let several keepalives flow: the server has read from every connection just before the stop.
	wallclock.Sleep(ctx, time.Second)
	stoppedAt := map[string]time.Time{}
	for id, p := range procs {
		stoppedAt[id] = time.Now()
		if err := p.Stop(); err != nil {
			return baselineResult{err: err}
		}
	}
	b.waitFor(ctx, b.bound, func() bool { return len(b.closed) == b.clients })
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, at := range stoppedAt {
		if closed, ok := b.closed[id]; ok && closed.After(at) {
			res.vals = append(res.vals, closed.Sub(at))
		} else {
			res.timeouts++
		}
	}
	return res
}

// waitFor waits until cond (called under b.mu) holds or bound passes.
func (b *baseline) waitFor(ctx context.Context, bound time.Duration, cond func() bool) bool {
	deadline := time.After(bound)
	for {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-b.changed:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// runBaselineClient is the client process: it connects, keeps alive every 300 ms with a 1 s
// lifetime (the lease client's defaults), and waits to be stopped and killed.
func runBaselineClient(addr, id string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	closed := make(chan error, 1)
	_, err := rsocket.Connect().
		SetupPayload(payload.NewString(id, "")).
		KeepAlive(leaseclient.DefaultKeepalive, leaseclient.DefaultKeepaliveLifetime, 1).
		OnClose(func(err error) { closed <- err }).
		Transport(rsocket.TCPClient().SetAddr(addr).Build()).
		Start(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "baseline client %s: %v\n", id, err)
		return 1
	}
	fmt.Printf("baseline client %s connected to %s\n", id, addr)
	select {
	case <-ctx.Done():
		return 0
	case err := <-closed:
		fmt.Fprintf(os.Stderr, "baseline client %s: connection closed: %v\n", id, err)
		return 1
	}
}
