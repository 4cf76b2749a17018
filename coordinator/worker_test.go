package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/extension"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"

	"github.com/retryring/retryring/internal/rsclient"
	"github.com/retryring/retryring/lease"
)

// A minimal worker built on rsocket-go's client, enough to drive the coordinator in tests: one
// element of demand outstanding, release after a shrink, follow not_leader, reconnect with the
// same incarnation. The real client is worker/leaseclient.

var testRing = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}

// gotLease is one element as the worker received it. The lease is valid from the moment the
// demand it answers was sent (test clock, which is also the coordinator's clock).
type gotLease struct {
	lease lease.Lease
	at    time.Time
	via   string
}

type testWorker struct {
	// sendMu keeps Close from running while a request's frame is being written: rsocket-go
	// v0.8.16 writes a request-response's frame inside RequestResponse and closes its send queue in
	// Close, a race inside the library that -race reports (seen when a release is written as the
	// worker drops its connection at a leader kill).
	sendMu sync.RWMutex
	t      testing.TB
	id     string
	inc    string
	ring   lease.RingKey
	addrs  []string

	// features are announced in SETUP (lease.FeatureControls: the elements carry the controls).
	features []string
	// noRelease makes the worker keep quiet after a shrink (it never releases).
	noRelease bool
	// noReconnect makes the worker stop when its first stream ends.
	noReconnect bool
	// reconnectGate, when set, holds the worker back after a stream ended, once it has received
	// an element, until the gate is closed: a worker slow to find a new leader.
	reconnectGate <-chan struct{}

	mu       sync.Mutex
	leaving  bool
	leftAt   time.Time // when it asked to leave: it uses nothing from then on
	client   rsocket.Client
	via      string
	got      []gotLease
	streamEr error
	stopped  bool
	stop     chan struct{}
	done     chan struct{}
}

func newTestWorker(t testing.TB, id string, addrs ...string) *testWorker {
	return &testWorker{t: t, id: id, inc: id + "-inc1", ring: testRing, addrs: addrs,
		stop: make(chan struct{}), done: make(chan struct{})}
}

func composite(route string) []byte {
	tags, err := extension.EncodeRouting(route)
	if err != nil {
		panic(err)
	}
	md, err := extension.NewCompositeMetadataBuilder().PushWellKnown(extension.MessageRouting, tags).Build()
	if err != nil {
		panic(err)
	}
	return md
}

func (w *testWorker) setupData() []byte {
	b, _ := json.Marshal(lease.Setup{WorkerID: w.id, Incarnation: w.inc, Region: w.ring.Region, Cluster: w.ring.Cluster, Service: w.ring.Service, Features: w.features})
	return b
}

// dial connects to addr with keepalives every 100 ms. The TCP connection is open before Start, as
// the lease client's is (leaseclient.predialed): otherwise a dial slower than one period (a loaded
// host under -race) lets rsocket-go write its first KEEPALIVE while it writes SETUP, a data race
// inside the library.
func (w *testWorker) dial(addr string) (rsocket.Client, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	// The client lives as long as the context given to Start: not a timeout context.
	c, err := rsocket.Connect().
		KeepAlive(100*time.Millisecond, time.Second, 3).
		DataMimeType(lease.DataMIME).
		MetadataMimeType(lease.MetadataMIME).
		SetupPayload(payload.New(w.setupData(), nil)).
		Transport(rsclient.Transport(conn)).
		Start(context.Background())
	if err != nil {
		_ = conn.Close()
	}
	return c, err
}

// subscriber does the demand accounting of one ring.leases stream, asking for the next element
// only from inside OnSubscribe and OnNext.
type subscriber struct {
	w          *testWorker
	via        string
	sub        rx.Subscription
	demandSent time.Time
	errc       chan error
	once       sync.Once

	// mu and halted keep Request from racing with the client's Close: rsocket-go closes its send
	// queue while a concurrent Request may still be writing to it.
	mu     sync.Mutex
	halted bool
}

func (s *subscriber) end(err error) { s.once.Do(func() { s.errc <- err }) }

// halt stops all further demand; the client may be closed after it returns.
func (s *subscriber) halt() {
	s.mu.Lock()
	s.halted = true
	s.mu.Unlock()
}

func (s *subscriber) OnSubscribe(_ context.Context, sub rx.Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sub = sub
	s.demandSent = time.Now()
	if !s.halted {
		sub.Request(1)
	}
}

func (s *subscriber) OnNext(p payload.Payload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.halted {
		return
	}
	var wl lease.WireLease
	if err := json.Unmarshal(p.Data(), &wl); err != nil {
		s.end(fmt.Errorf("bad element: %w", err))
		return
	}
	l, err := wl.Decode(s.demandSent)
	if err != nil {
		s.end(err)
		return
	}
	s.w.install(gotLease{lease: l, at: time.Now(), via: s.via})
	s.demandSent = time.Now()
	s.sub.Request(1)
}

func (s *subscriber) OnError(err error) { s.end(err) }
func (s *subscriber) OnComplete()       { s.end(errors.New("stream completed")) }

func (w *testWorker) install(g gotLease) {
	w.mu.Lock()
	var prev *lease.Lease
	if len(w.got) > 0 {
		p := w.got[len(w.got)-1].lease
		prev = &p
	}
	w.got = append(w.got, g)
	client, quiet := w.client, w.noRelease
	w.mu.Unlock()
	if prev == nil || g.lease.Epoch <= prev.Epoch || quiet || client == nil {
		return
	}
	dropped := !prev.Ranges.Subtract(g.lease.Ranges).Empty() || (prev.IsNode0() && !g.lease.IsNode0())
	if dropped {
		// The worker's guard now refuses the dropped tokens; nothing is in flight in a test.
		go func() {
			if err := w.request(client, lease.RouteRelease, lease.ReleaseRequest{WorkerID: w.id, Epoch: g.lease.Epoch}, nil); err != nil {
				w.t.Logf("%s: release of epoch %d: %v", w.id, g.lease.Epoch, err)
			}
		}()
	}
}

// request sends a request-response and decodes the answer into out (if not nil).
func (w *testWorker) request(client rsocket.Client, route string, body, out any) error {
	data, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	w.sendMu.RLock()
	answer := client.RequestResponse(payload.New(data, composite(route)))
	w.sendMu.RUnlock()
	p, err := answer.Block(ctx)
	if err != nil {
		return asWire(err)
	}
	if out != nil {
		return json.Unmarshal(p.Data(), out)
	}
	return nil
}

// closeClient closes client once no request's frame is being written (sendMu).
func (w *testWorker) closeClient(client rsocket.Client) {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	_ = client.Close()
}

// asWire turns an RSocket error into the catalog's WireError when its data is one.
func asWire(err error) error {
	var re rsocket.Error
	if errors.As(err, &re) {
		return lease.FromWire(re.ErrorData())
	}
	return err
}

// start runs the worker: connect, subscribe, and on any end of the stream reconnect (following
// not_leader) with the same incarnation, until close.
func (w *testWorker) start() *testWorker {
	go w.run()
	w.t.Cleanup(w.close)
	return w
}

func (w *testWorker) run() {
	defer close(w.done)
	next := 0
	addr := w.addrs[0]
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		client, err := w.dial(addr)
		if err != nil {
			next++
			addr = w.addrs[next%len(w.addrs)]
			w.pause(50 * time.Millisecond)
			continue
		}
		w.mu.Lock()
		w.client, w.via = client, addr
		w.mu.Unlock()
		s := &subscriber{w: w, via: addr, errc: make(chan error, 1)}
		client.RequestStream(payload.New([]byte(`{"worker_id":"`+w.id+`"}`), composite(lease.RouteLeases))).SubscribeWith(context.Background(), s)
		select {
		case err = <-s.errc:
		case <-w.stop:
			s.halt()
			w.closeClient(client)
			return
		}
		s.halt()
		w.mu.Lock()
		w.streamEr = asWire(err)
		leaving := w.leaving || w.noReconnect
		w.mu.Unlock()
		if leaving {
			<-w.stop
			w.closeClient(client)
			return
		}
		w.closeClient(client)
		w.mu.Lock()
		w.client = nil
		held := len(w.got) > 0
		w.mu.Unlock()
		if w.reconnectGate != nil && held {
			select {
			case <-w.reconnectGate:
			case <-w.stop:
				return
			}
		}
		var we *lease.WireError
		if errors.As(asWire(err), &we) && we.Code == lease.CodeNotLeader && we.LeaderRSocketAddr != "" {
			addr = we.LeaderRSocketAddr
			continue
		}
		next++
		addr = w.addrs[next%len(w.addrs)]
		w.pause(50 * time.Millisecond)
	}
}

func (w *testWorker) pause(d time.Duration) {
	select {
	case <-w.stop:
	case <-time.After(d):
	}
}

// close drops the connection without leaving, as a crashed worker would.
func (w *testWorker) close() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
}

// leave calls ring.leave on the current connection.
func (w *testWorker) leave() error {
	w.mu.Lock()
	client := w.client
	w.leaving, w.leftAt = true, time.Now()
	w.mu.Unlock()
	if client == nil {
		return errors.New("not connected")
	}
	var ack lease.Ack
	if err := w.request(client, lease.RouteLeave, lease.LeaveRequest{WorkerID: w.id}, &ack); err != nil {
		return err
	}
	if !ack.OK {
		return errors.New("leave not acknowledged")
	}
	return nil
}

func (w *testWorker) latest() (gotLease, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return gotLease{}, false
	}
	return w.got[len(w.got)-1], true
}

func (w *testWorker) history() []gotLease {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]gotLease(nil), w.got...)
}

func (w *testWorker) lastStreamErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streamEr
}

// holds reports whether the worker's latest element has exactly these ranges and node index.
func (w *testWorker) holds(ranges lease.Ranges, nodeIndex, nodeCount int) bool {
	g, ok := w.latest()
	return ok && g.lease.Ranges.Equal(ranges) && g.lease.NodeIndex == nodeIndex && g.lease.NodeCount == nodeCount
}

// usage is a stretch of time during which a worker may use ranges (and Node-0 if node0).
type usage struct {
	worker   string
	from, to time.Time
	ranges   lease.Ranges
	node0    bool
	epoch    uint64
}

// usages turns a worker's elements into the stretches it may use each: from receipt until the
// next element replaced it or its TTL, counted from the demand it answered, ran out. A worker that
// is still running is counted as using its last element until its TTL ends.
func usages(w *testWorker) []usage {
	h := w.history()
	w.mu.Lock()
	leftAt := w.leftAt
	w.mu.Unlock()
	out := make([]usage, 0, len(h))
	for i, g := range h {
		end := g.lease.ExpiresAt()
		if i+1 < len(h) && h[i+1].at.Before(end) {
			end = h[i+1].at
		}
		if !leftAt.IsZero() && leftAt.Before(end) {
			end = leftAt
		}
		out = append(out, usage{worker: w.id + "/" + w.inc, from: g.at, to: end, ranges: g.lease.Ranges, node0: g.lease.IsNode0(), epoch: g.lease.Epoch})
	}
	return out
}

// checkExclusive fails the test if two workers could use one token, or both be Node-0, at the
// same instant (invariants 2 and 3).
func checkExclusive(t testing.TB, workers ...*testWorker) {
	t.Helper()
	var all []usage
	for _, w := range workers {
		all = append(all, usages(w)...)
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a.worker == b.worker || !a.from.Before(b.to) || !b.from.Before(a.to) {
				continue
			}
			if a.ranges.Overlaps(b.ranges) {
				t.Errorf("exclusivity: %s epoch %d %v and %s epoch %d %v overlap in tokens %v and in time",
					a.worker, a.epoch, a.ranges, b.worker, b.epoch, b.ranges, a.ranges.Intersect(b.ranges))
			}
			if a.node0 && b.node0 {
				t.Errorf("two Node-0: %s epoch %d and %s epoch %d", a.worker, a.epoch, b.worker, b.epoch)
			}
		}
	}
}

func leasesPayload(workerID string) payload.Payload {
	return payload.New([]byte(`{"worker_id":"`+workerID+`"}`), composite(lease.RouteLeases))
}

// startSplitPair starts workers a and b against addrs, a first, and waits until a holds the first
// half of the ring as Node-0 and b the second.
func startSplitPair(t *testing.T, addrs []string) (a, b *testWorker) {
	t.Helper()
	a = newTestWorker(t, "a", addrs...).start()
	eventually(t, 10*time.Second, "a holds the ring", func() bool { return a.holds(lease.Ranges{lease.FullRing}, 0, 1) })
	b = newTestWorker(t, "b", addrs...).start()
	split := lease.Split(2)
	eventually(t, 10*time.Second, "a and b split the ring", func() bool {
		return a.holds(lease.Ranges{split[0]}, 0, 2) && b.holds(lease.Ranges{split[1]}, 1, 2)
	})
	return a, b
}
