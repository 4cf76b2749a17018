package leaseclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/core/transport"
	"github.com/rsocket/rsocket-go/extension"
	rslogger "github.com/rsocket/rsocket-go/logger"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

func TestMain(m *testing.M) {
	// rsocket-go logs connection teardown on its global logger; the tests provoke plenty of it.
	rslogger.SetLogger(nil)
	os.Exit(m.Run())
}

// seq orders events across the client hooks and the fake coordinators of one test.
type seq struct{ n atomic.Int64 }

func (s *seq) next() int64 { return s.n.Add(1) }

// wireError is a catalog error whose text is its JSON: rsocket-go sends an error's text as the data
// of APPLICATION_ERROR and REJECTED_SETUP, which is how the real coordinator must do it too.
type wireError lease.WireError

func (e wireError) Error() string {
	b, _ := json.Marshal(lease.WireError(e))
	return string(b)
}

type setupRecord struct {
	setup              lease.Setup
	dataMIME, metaMIME string
	keepalive          time.Duration
	lifetime           time.Duration
}

type answerRecord struct {
	demandAt time.Time // fake's clock when the demand this element answers arrived
	sentAt   time.Time // fake's clock when the element went out
	epoch    uint64
}

type releaseRecord struct {
	req lease.ReleaseRequest
	seq int64
}

// fakeCoord is a coordinator node reduced to what the client sees: SETUP, the four routes, one
// assignment for whoever connects, renewals on a short real-time tick, and switches for the
// situations under test (follower, silent, rejecting SETUP).
type fakeCoord struct {
	t      *testing.T
	id     string
	addr   string
	ln     net.Listener
	clock  *clocktest.Manual
	seq    *seq
	ctx    context.Context
	cancel context.CancelFunc
	served chan struct{}
	renew  time.Duration

	mu         sync.Mutex
	follower   bool
	leaderID   string
	leaderAddr string
	// noLeaderBody, when set, is the JSON a follower without a leaderAddr answers instead of a
	// bare no_leader.
	noLeaderBody string
	rejectSetup  bool
	silent       bool
	advance      time.Duration // clock advance between receiving a demand and answering it
	assign       lease.WireLease
	corrupt      func(lease.WireLease) []byte // when set, what is sent instead of each element
	setups       []setupRecord
	routes       []string
	demandNs     []int
	demands      []time.Time
	overDemand   int // demands that arrived while one was still outstanding
	answers      []answerRecord
	releases     []releaseRecord
	leaves       []lease.LeaveRequest
	reports      []lease.Report
	reportCalls  int    // ring.report requests, answered or not
	reportErr    string // when set, the error code ring.report is answered with
	streams      int
	syncs        int
	live         map[*fakeStream]struct{}
	socks        map[rsocket.CloseableRSocket]chan struct{}
}

func startFake(t *testing.T, id string, clock *clocktest.Manual, sq *seq) *fakeCoord {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeCoord{
		t: t, id: id, addr: ln.Addr().String(), ln: ln, clock: clock, seq: sq, ctx: ctx, cancel: cancel,
		served: make(chan struct{}), renew: 10 * time.Millisecond,
		assign: lease.WireLease{
			NodeIndex: 0, NodeCount: 1, Epoch: 1, Generation: 1,
			Ranges: lease.EncodeRanges(lease.Split(1)), TTLMs: 3000,
		},
		socks: make(map[rsocket.CloseableRSocket]chan struct{}),
		live:  make(map[*fakeStream]struct{}),
	}
	srv := rsocket.Receive().
		Acceptor(f.accept).
		Transport(func(context.Context) (transport.ServerTransport, error) {
			return transport.NewTCPServerTransport(func(context.Context) (net.Listener, error) { return ln, nil }), nil
		})
	go func() {
		defer close(f.served)
		_ = srv.Serve(ctx)
	}()
	t.Cleanup(f.stop)
	fakesMu.Lock()
	fakesByTest[t] = append(fakesByTest[t], f)
	fakesMu.Unlock()
	t.Cleanup(func() {
		fakesMu.Lock()
		delete(fakesByTest, t)
		fakesMu.Unlock()
	})
	return f
}

var (
	fakesMu     sync.Mutex
	fakesByTest = map[*testing.T][]*fakeCoord{}
)

// quiesceAll quiesces the fakes of t before its client goes away (see quiesce). It is best effort
// and never fails: it runs in cleanups, which must go on to stop the client.
func quiesceAll(t *testing.T) {
	fakesMu.Lock()
	fakes := append([]*fakeCoord(nil), fakesByTest[t]...)
	fakesMu.Unlock()
	for _, f := range fakes {
		if !f.tryQuiesce(5 * time.Second) {
			t.Logf("fake %s did not quiesce", f.id)
		}
	}
}

// stop closes every connection and the listener. The client closes its connections first (tests
// stop their clients before their fakes); closing them here as well, while the server may still be
// answering on them, would be a send/close data race inside rsocket-go, which -race reports.
func (f *fakeCoord) stop() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		f.read(func(f *fakeCoord) { n = len(f.socks) })
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.kill()
}

// kill closes every connection and the listener at once, as a crashed coordinator would. Quiesce
// first if a client is connected (see quiesce). The listener goes first: a client whose connection
// was dropped would otherwise reconnect to the dead coordinator before Serve closes it.
func (f *fakeCoord) kill() {
	_ = f.ln.Close()
	f.dropConnections()
	f.cancel()
	select {
	case <-f.served:
	case <-time.After(10 * time.Second):
		f.t.Errorf("fake %s did not stop", f.id)
	}
	f.dropConnections()
}

// sync orders what the calling goroutine did so far before every later holder of f.mu: the
// producer calls it after each element it hands to rsocket-go, so that the fake's own closes (which
// take f.mu) are ordered after those sends.
func (f *fakeCoord) sync() {
	f.mu.Lock()
	f.syncs++
	f.mu.Unlock()
}

func (f *fakeCoord) dropConnections() {
	f.mu.Lock()
	socks := make([]rsocket.CloseableRSocket, 0, len(f.socks))
	for s := range f.socks {
		socks = append(socks, s)
	}
	f.mu.Unlock()
	for _, s := range socks {
		_ = s.Close()
	}
}

// quiesce stops answering and waits until every live stream holds one unanswered demand: then no
// element is in flight and the client sends nothing until the fake answers again. Closing a
// connection under a client that is queueing a frame is a data race inside rsocket-go (its send
// queue is closed under the sender); tests that cut connections quiesce first to keep -race quiet.
func (f *fakeCoord) quiesce(t *testing.T) {
	t.Helper()
	if !f.tryQuiesce(15 * time.Second) {
		t.Fatal("timed out waiting for every stream to hold one unanswered demand")
	}
}

// cut makes the client reconnect the way -race tolerates: quiesce, close every connection, then
// answer again.
func (f *fakeCoord) cut(t *testing.T) {
	t.Helper()
	f.quiesce(t)
	f.dropConnections()
	f.set(func(f *fakeCoord) { f.silent = false })
}

func (f *fakeCoord) tryQuiesce(bound time.Duration) bool {
	f.set(func(f *fakeCoord) { f.silent = true })
	deadline := time.Now().Add(bound)
	for {
		settled := true
		f.read(func(f *fakeCoord) {
			for st := range f.live {
				if st.pending != 1 {
					settled = false
				}
			}
		})
		if settled {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fakeCoord) set(fn func(f *fakeCoord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeCoord) read(fn func(f *fakeCoord)) { f.set(fn) }

func (f *fakeCoord) accept(_ context.Context, sp payload.SetupPayload, sock rsocket.CloseableRSocket) (rsocket.RSocket, error) {
	var s lease.Setup
	if err := json.Unmarshal(sp.Data(), &s); err != nil || s.Validate() != nil {
		return nil, wireError{Code: lease.CodeBadSetup, Message: "bad setup data"}
	}
	done := make(chan struct{})
	f.mu.Lock()
	f.setups = append(f.setups, setupRecord{
		setup: s, dataMIME: sp.DataMimeType(), metaMIME: sp.MetadataMimeType(),
		keepalive: sp.TimeBetweenKeepalive(), lifetime: sp.MaxLifetime(),
	})
	reject := f.rejectSetup
	if !reject {
		f.socks[sock] = done
	}
	f.mu.Unlock()
	if reject {
		// rsocket-go's client sends REQUEST_STREAM right after SETUP without waiting for an answer,
		// and a connection closed by the peer while a frame is being queued is a data race inside
		// rsocket-go. Rejecting a little later keeps that race out of -race runs.
		time.Sleep(50 * time.Millisecond)
		return nil, wireError{Code: lease.CodeBadSetup, Message: "refused by the test"}
	}
	sock.OnClose(func(error) {
		f.mu.Lock()
		delete(f.socks, sock)
		f.mu.Unlock()
		close(done)
	})
	return rsocket.NewAbstractSocket(
		rsocket.RequestStream(func(p payload.Payload) flux.Flux { return f.leases(s, done, p) }),
		rsocket.RequestResponse(func(p payload.Payload) mono.Mono { return f.requestResponse(s, p) }),
	), nil
}

// routeOf reads the routing entry of the composite metadata.
func routeOf(p payload.Payload) string {
	md, ok := p.Metadata()
	if !ok {
		return ""
	}
	sc := extension.CompositeMetadata(md).Scanner()
	for sc.Scan() {
		mime, data, err := sc.Metadata()
		if err != nil {
			return ""
		}
		if mime == extension.MessageRouting.String() {
			tags, err := extension.ParseRoutingTags(data)
			if err != nil || len(tags) != 1 {
				return ""
			}
			return tags[0]
		}
	}
	return ""
}

// rawWireError is an error body given as JSON text, for bodies lease.WireError cannot express.
type rawWireError string

func (e rawWireError) Error() string { return string(e) }

func (f *fakeCoord) notLeader() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaderAddr == "" {
		if f.noLeaderBody != "" {
			return rawWireError(f.noLeaderBody)
		}
		return wireError{Code: lease.CodeNoLeader}
	}
	return wireError{Code: lease.CodeNotLeader, LeaderID: f.leaderID, LeaderRSocketAddr: f.leaderAddr}
}

type fakeStream struct {
	setup    lease.Setup
	pending  int
	demandAt time.Time // fake clock
	demandRT time.Time // real time, for the reactor-go workaround in produce
	stop     chan struct{}
	stopOnce sync.Once
}

func (f *fakeCoord) leases(s lease.Setup, connDone <-chan struct{}, p payload.Payload) flux.Flux {
	route := routeOf(p)
	var req lease.LeasesRequest
	reqErr := json.Unmarshal(p.Data(), &req)
	f.mu.Lock()
	f.routes = append(f.routes, route)
	follower := f.follower
	f.streams++
	f.mu.Unlock()
	switch {
	case follower:
		return flux.Error(f.notLeader())
	case route != lease.RouteLeases:
		return flux.Error(wireError{Code: lease.CodeUnknownRoute})
	case reqErr != nil || (req.WorkerID != "" && req.WorkerID != s.WorkerID):
		return flux.Error(wireError{Code: lease.CodeBadRequest})
	}
	st := &fakeStream{setup: s, stop: make(chan struct{})}
	f.set(func(f *fakeCoord) { f.live[st] = struct{}{} })
	return flux.Create(func(_ context.Context, sink flux.Sink) {
		// The generator's ctx is the Serve ctx: the producer stops on DoFinally or connection close.
		go f.produce(st, connDone, sink)
	}).DoOnRequest(func(n int) {
		f.mu.Lock()
		now := f.clock.Now()
		f.demandNs = append(f.demandNs, n)
		f.demands = append(f.demands, now)
		if st.pending > 0 {
			f.overDemand++
		}
		st.pending += n
		st.demandAt = now
		st.demandRT = time.Now()
		f.mu.Unlock()
	}).DoFinally(func(rx.SignalType) {
		st.stopOnce.Do(func() { close(st.stop) })
	})
}

// produce answers outstanding demand at each renewal tick, advancing the clock first by f.advance.
//
// It answers a demand only one full tick after it arrived. DoOnRequest runs just before reactor-go's
// sink counts the demand, and the sink loses an element that Next offers while that count is being
// made (its drain does not re-check after a concurrent Request); a demand that old has long been
// counted. The real coordinator's producer has the same exposure (see the report).
func (f *fakeCoord) produce(st *fakeStream, connDone <-chan struct{}, sink flux.Sink) {
	tick := time.NewTicker(f.renew)
	defer tick.Stop()
	defer f.set(func(f *fakeCoord) { delete(f.live, st) })
	for {
		select {
		case <-st.stop:
			return
		case <-connDone:
			return
		case <-f.ctx.Done():
			return
		case <-tick.C:
		}
		f.mu.Lock()
		if st.pending == 0 || f.silent || time.Since(st.demandRT) < f.renew {
			f.mu.Unlock()
			continue
		}
		st.pending--
		f.clock.Advance(f.advance)
		w := f.assign
		w.WorkerID = st.setup.WorkerID
		w.Ring = st.setup.Ring()
		w.IssuedAtMs = f.clock.Now().UnixMilli()
		f.answers = append(f.answers, answerRecord{demandAt: st.demandAt, sentAt: f.clock.Now(), epoch: w.Epoch})
		corrupt := f.corrupt
		f.mu.Unlock()
		b, err := json.Marshal(w)
		if err != nil {
			f.t.Errorf("marshal: %v", err)
			return
		}
		if corrupt != nil {
			b = corrupt(w)
		}
		sink.Next(payload.New(b, nil))
		f.sync()
	}
}

func (f *fakeCoord) requestResponse(s lease.Setup, p payload.Payload) mono.Mono {
	route := routeOf(p)
	data := bytes.Clone(p.Data())
	f.mu.Lock()
	f.routes = append(f.routes, route)
	follower := f.follower
	f.mu.Unlock()
	if follower {
		return mono.Error(f.notLeader())
	}
	ok := payload.New([]byte(`{"ok":true}`), nil)
	switch route {
	case lease.RouteRelease:
		var r lease.ReleaseRequest
		if err := json.Unmarshal(data, &r); err != nil || r.WorkerID != s.WorkerID {
			return mono.Error(wireError{Code: lease.CodeBadRequest})
		}
		f.set(func(f *fakeCoord) { f.releases = append(f.releases, releaseRecord{req: r, seq: f.seq.next()}) })
		return mono.Just(ok)
	case lease.RouteLeave:
		var r lease.LeaveRequest
		if err := json.Unmarshal(data, &r); err != nil || r.WorkerID != s.WorkerID {
			return mono.Error(wireError{Code: lease.CodeBadRequest})
		}
		f.set(func(f *fakeCoord) { f.leaves = append(f.leaves, r) })
		return mono.Just(ok)
	case lease.RouteReport:
		var r lease.Report
		err := json.Unmarshal(data, &r)
		code := ""
		f.set(func(f *fakeCoord) {
			f.reportCalls++
			code = f.reportErr
			if code == "" && err == nil && r.WorkerID == s.WorkerID {
				f.reports = append(f.reports, r)
			}
		})
		switch {
		case code != "":
			return mono.Error(wireError{Code: code})
		case err != nil || r.WorkerID != s.WorkerID:
			return mono.Error(wireError{Code: lease.CodeBadRequest})
		}
		return mono.Just(ok)
	case lease.RouteView:
		return mono.Just(payload.New([]byte(fmt.Sprintf(`{"coordinator_id":%q}`, f.id)), nil))
	default:
		return mono.Error(wireError{Code: lease.CodeUnknownRoute})
	}
}

// eventually polls cond until it holds, failing the test after a generous bound. The bound is a
// guard against hangs, not a performance assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
