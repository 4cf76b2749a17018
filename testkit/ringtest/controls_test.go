package ringtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/extension"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/rsclient"
	"github.com/retryring/retryring/lease"
)

// rawWorker is a lease client on rsocket-go alone that announces the SETUP features it is given
// (the harness's workers run worker/leaseclient, whose features are its own). It keeps one
// element of demand outstanding, follows not_leader, reconnects with its incarnation, and never
// releases: a shrink of its range waits for the expiry of what it held.
//
// It connects only to coordinators that run: rsocket-go closes a connection's send queue, when
// the connection fails, while the client's first Request may be sending to it (a race that
// worker/leaseclient orders with a connection wrapper of its own). Once connected, every later
// Request is sent from OnNext, on the goroutine that also closes the connection.
type rawWorker struct {
	id, inc  string
	features []string
	ring     lease.RingKey
	addrs    []string
	running  func(addr string) bool

	stop chan struct{}
	done chan struct{}

	mu  sync.Mutex
	got []rawElement
}

// rawElement is one element as the worker received it, from the coordinator at via.
type rawElement struct {
	wire   lease.WireLease
	demand time.Time // when the demand it answers was sent: the lease runs from here
	at     time.Time
	via    string
}

func startRaw(t *testing.T, c *Cluster, id string, features ...string) *rawWorker {
	running := func(addr string) bool {
		for _, co := range c.Coordinators() {
			if co.RSocketAddr() == addr {
				return co.Running()
			}
		}
		return false
	}
	w := &rawWorker{id: id, inc: id + "-1", features: features, ring: c.Options().Ring, addrs: c.RSocketAddrs(),
		running: running, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	t.Cleanup(func() {
		close(w.stop)
		<-w.done
	})
	return w
}

func (w *rawWorker) run() {
	defer close(w.done)
	next, addr := 0, w.addrs[0]
	for {
		redirect := ""
		if w.running(addr) {
			redirect = w.session(addr)
		}
		select {
		case <-w.stop:
			return
		default:
		}
		if redirect != "" && w.running(redirect) {
			addr = redirect
			continue
		}
		select {
		case <-w.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		next = (next + 1) % len(w.addrs)
		addr = w.addrs[next]
	}
}

// session holds one connection to addr until its lease stream ends or the worker stops; it
// returns the leader's address when the coordinator answered not_leader with one.
func (w *rawWorker) session(addr string) (redirect string) {
	setup, _ := json.Marshal(lease.Setup{WorkerID: w.id, Incarnation: w.inc, Region: w.ring.Region,
		Cluster: w.ring.Cluster, Service: w.ring.Service, Features: w.features})
	// Open before Start and written through rsclient, as the lease client's connection is: a dial
	// slower than one KEEPALIVE period would have rsocket-go write a KEEPALIVE while it writes SETUP.
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	client, err := rsocket.Connect().
		KeepAlive(100*time.Millisecond, time.Second, 1).
		DataMimeType(lease.DataMIME).
		MetadataMimeType(lease.MetadataMIME).
		SetupPayload(payload.New(setup, nil)).
		Transport(rsclient.Transport(conn)).
		Start(context.Background())
	if err != nil {
		_ = conn.Close()
		return ""
	}
	defer client.Close()
	tags, _ := extension.EncodeRouting(lease.RouteLeases)
	md, _ := extension.NewCompositeMetadataBuilder().PushWellKnown(extension.MessageRouting, tags).Build()

	ended := make(chan error, 1)
	end := func(err error) {
		select {
		case ended <- err:
		default: // the stream ended already
		}
	}
	// demandMu keeps a Request from racing with Close: rsocket-go closes its send queue while a
	// concurrent Request may still write to it. Deferred after Close, halting runs before it.
	var demandMu sync.Mutex
	halted := false
	defer func() {
		demandMu.Lock()
		halted = true
		demandMu.Unlock()
	}()
	demand := time.Now()
	var sub rx.Subscription
	ask := func() {
		demand = time.Now()
		if !halted {
			sub.Request(1)
		}
	}
	subscribed := func() (lost bool) {
		// rsocket-go panics here when the connection closed since SETUP: a lost connection.
		defer func() { lost = recover() != nil }()
		client.RequestStream(payload.New([]byte("{}"), md)).Subscribe(context.Background(),
			rx.OnSubscribe(func(_ context.Context, s rx.Subscription) {
				// The first Request runs beside this callback, which waits for it: when the
				// connection closes meanwhile, rsocket-go errors the stream from inside Request
				// and delivers the error only once this callback returned. Waiting orders the
				// Request before that error for the race detector, the bound ends the wait.
				queued := make(chan struct{})
				go func() {
					defer close(queued)
					demandMu.Lock()
					defer demandMu.Unlock()
					sub = s
					ask()
				}()
				select {
				case <-queued:
				case <-time.After(250 * time.Millisecond):
				}
			}),
			rx.OnNext(func(p payload.Payload) error {
				var el lease.WireLease
				if err := json.Unmarshal(p.Data(), &el); err != nil {
					return err
				}
				demandMu.Lock()
				defer demandMu.Unlock()
				w.mu.Lock()
				w.got = append(w.got, rawElement{wire: el, demand: demand, at: time.Now(), via: addr})
				w.mu.Unlock()
				ask()
				return nil
			}),
			rx.OnError(end),
			rx.OnComplete(func() { end(nil) }))
		return false
	}
	if subscribed() {
		return ""
	}
	select {
	case err := <-ended:
		var re rsocket.Error
		if errors.As(err, &re) {
			var we lease.WireError
			if json.Unmarshal(re.ErrorData(), &we) == nil && we.Code == lease.CodeNotLeader {
				redirect = we.LeaderRSocketAddr
			}
		}
	case <-w.stop:
	}
	return redirect
}

// elements returns what the worker received so far.
func (w *rawWorker) elements() []rawElement {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// waitElement waits until an element after the first `after` ones satisfies ok, and returns it
// with the number of elements received before it since `after`.
func (w *rawWorker) waitElement(t *testing.T, what string, after int, ok func(rawElement) bool) (rawElement, int) {
	t.Helper()
	var found rawElement
	skipped := 0
	if err := poll(DefaultWait, func() bool {
		els := w.elements()
		for i := after; i < len(els); i++ {
			if ok(els[i]) {
				found, skipped = els[i], i-after
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("%s: %s within %v; last elements %+v", w.id, what, DefaultWait, tail(w.elements(), 3))
	}
	return found, skipped
}

func tail(els []rawElement, n int) []rawElement { return els[max(0, len(els)-n):] }

// controlsCall posts a flow-control call to co's admin API and returns the committed controls.
func controlsCall(t *testing.T, co *Coordinator, ring lease.RingKey, action, body string) admin.ControlsAnswer {
	t.Helper()
	url := fmt.Sprintf("http://%s%s%s/%s/%s/%s", co.Node().HTTPAddr(), admin.PathRings, ring.Region, ring.Cluster, ring.Service, action)
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a admin.ControlsAnswer
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
		t.Fatalf("POST %s %s: %d %s", url, body, resp.StatusCode, b)
	}
	return a
}

func follower(c *Cluster) *Coordinator {
	l := c.Leader()
	for _, co := range c.Coordinators() {
		if co != l && co.Running() {
			return co
		}
	}
	return nil
}

// member is w's member in the leader's view.
func member(t *testing.T, c *Cluster, w *rawWorker) admin.MemberView {
	t.Helper()
	r, ok := c.Leader().View().Ring(w.ring)
	if !ok {
		t.Fatalf("the leader has no ring %s", w.ring)
	}
	for _, m := range r.Members {
		if m.WorkerID == w.id && m.Incarnation == w.inc {
			return m
		}
	}
	t.Fatalf("%s is not a member: %+v", w.id, r.Members)
	return admin.MemberView{}
}

func share(t *testing.T, limit float64, m admin.MemberView) float64 {
	t.Helper()
	rs, err := lease.DecodeRanges(m.Ranges)
	if err != nil {
		t.Fatal(err)
	}
	return limit * rs.Fraction()
}

func rate(el rawElement) (float64, bool) {
	if c := el.wire.Controls; c != nil && c.RatePerS != nil {
		return *c.RatePerS, true
	}
	return 0, false
}

func paused(el rawElement) bool { return el.wire.Controls != nil && el.wire.Controls.Paused }

// TestFlowControls is invariant 10 on the wire, with three real voters and real RSocket clients:
// two announce "controls", one does not. Through followers' admin APIs the operator limits the
// ring's rate, pauses it whole, pauses an impl type, kills the leader while it is paused, and
// resumes through the new one.
//   - Every element to a client with the feature carries controls and renewal_ms; a change
//     reaches it in the first element sent after the commit (the one in flight at the commit may
//     come first), which the leader sends at once, not at the next renewal.
//   - The parts of the rate limit add up to the limit over the members with ranges.
//   - The client without the feature gets no element while the ring is paused: its lease runs
//     out, it stays an active member with its epoch and ranges (no Down, no reassignment), and
//     its renewals resume after the resume.
//   - The controls survive the leader's death: the new leader's first elements carry them.
func TestFlowControls(t *testing.T) {
	c := NewCluster(t, Options{})
	timing := c.Options().Timing
	ring := c.Options().Ring
	f1 := startRaw(t, c, "f1", lease.FeatureControls)
	f2 := startRaw(t, c, "f2", lease.FeatureControls, "some-future-feature")
	p := startRaw(t, c, "p")
	workers := []*rawWorker{f1, f2, p}

	// The three settle on equal thirds.
	split := lease.Split(3)
	if err := poll(3*DefaultWait, func() bool {
		r, ok := c.Leader().View().Ring(ring)
		if !ok || len(r.Members) != 3 {
			return false
		}
		for i, m := range r.Members {
			rs, err := lease.DecodeRanges(m.Ranges)
			if err != nil || m.State != admin.MemberActive || !rs.Equal(lease.Ranges{split[i]}) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the ring did not settle on three equal shares: %+v", c.Leader().View().Rings)
	}
	for _, w := range workers {
		m := member(t, c, w)
		w.waitElement(t, "a lease of its settled share", 0, func(el rawElement) bool { return el.wire.Epoch == m.Epoch })
		if m.Controls == nil || *m.Controls != (len(w.features) > 0) {
			t.Errorf("%s: the leader's view says controls %v, its SETUP announced %q", w.id, m.Controls, w.features)
		}
	}
	for _, w := range workers {
		for _, el := range w.elements() {
			if el.wire.RenewalMs != timing.Renewal.Milliseconds() {
				t.Fatalf("%s: renewal_ms %d, want %d", w.id, el.wire.RenewalMs, timing.Renewal.Milliseconds())
			}
			c := el.wire.Controls
			if w == p && c != nil {
				t.Fatalf("p did not announce controls and got %+v", c)
			}
			if w != p && (c == nil || c.Paused || c.PausedImpl == nil || len(c.PausedImpl) != 0 || c.RatePerS != nil) {
				t.Fatalf("%s: controls %+v before any was set, want none paused and no limit", w.id, c)
			}
		}
	}

	// A rate limit: each part is the limit times the member's share of the ring; they add up.
	// Marks are taken after the answer: every element received after it carries the change, but
	// for one that was on its way when the change was committed.
	fol := follower(c)
	a := controlsCall(t, fol, ring, admin.ActionLimit, `{"per_second":90}`)
	mark := []int{len(f1.elements()), len(f2.elements())}
	if a.Controls.RatePerS == nil || *a.Controls.RatePerS != 90 || a.LeaderID != c.Leader().ID {
		t.Fatalf("limit through %s: %+v", fol.ID, a)
	}
	sum := share(t, 90, member(t, c, p))
	for i, w := range []*rawWorker{f1, f2} {
		want := share(t, 90, member(t, c, w))
		el, before := w.waitElement(t, "its part of the limit", mark[i], func(el rawElement) bool { _, ok := rate(el); return ok })
		if got, _ := rate(el); math.Abs(got-want) > 1e-9 || before > 1 {
			t.Fatalf("%s: rate_per_s %v after %d other elements, want %v in the first element after the commit", w.id, got, before, want)
		}
		sum += want
	}
	if math.Abs(sum-90) > 1e-9 {
		t.Fatalf("the parts add up to %v, want the limit 90", sum)
	}

	// A pause of the whole ring.
	before := map[string]admin.MemberView{}
	for _, w := range workers {
		before[w.id] = member(t, c, w)
	}
	generation := func() uint64 { r, _ := c.Leader().View().Ring(ring); return r.Generation }
	gen := generation()
	sentMark := []int{len(f1.elements()), len(f2.elements())}
	sent := time.Now()
	a = controlsCall(t, fol, ring, admin.ActionPause, `{"reason":"downstream maintenance"}`)
	if !a.Controls.Paused || a.Controls.Reason != "downstream maintenance" {
		t.Fatalf("pause: %+v", a)
	}
	answered := time.Now()
	mark = []int{len(f1.elements()), len(f2.elements())}
	pAtAnswer := len(p.elements())
	for i, w := range []*rawWorker{f1, f2} {
		if _, skipped := w.waitElement(t, "paused in an element", mark[i], paused); skipped > 1 {
			t.Fatalf("%s: %d elements after the answer before one said paused", w.id, skipped)
		}
		first, _ := w.waitElement(t, "paused in an element", sentMark[i], paused)
		t.Logf("%s: paused reached it %v after the call was sent, %v after its answer (renewal %v)", w.id,
			first.at.Sub(sent).Round(time.Millisecond), first.at.Sub(answered).Round(time.Millisecond), timing.Renewal)
	}
	// p gets nothing: its lease runs out while f1 goes on being renewed, and it keeps its tokens.
	// (An element sent before the commit may still arrive after the answer.)
	pEls := p.elements()
	last := pEls[len(pEls)-1]
	leaseEnd := last.demand.Add(time.Duration(last.wire.TTLMs) * time.Millisecond)
	if err := poll(DefaultWait, func() bool { return time.Now().After(leaseEnd.Add(timing.Renewal)) }); err != nil {
		t.Fatal(err)
	}
	f1Mark := len(f1.elements())
	f1.waitElement(t, "three more renewals while paused", f1Mark+2, paused)
	after := p.elements()[pAtAnswer:]
	if len(after) > 1 || (len(after) == 1 && after[0].wire.IssuedAtMs > answered.UnixMilli()) {
		t.Fatalf("p, which cannot obey a pause, got %d elements after the pause was committed: %+v", len(after), after)
	}
	if m := member(t, c, p); m.State != admin.MemberActive || m.Epoch != before["p"].Epoch ||
		!slices.Equal(m.Ranges, before["p"].Ranges) || generation() != gen {
		t.Fatalf("p while its lease ran out: %+v, generation %d; before the pause %+v, generation %d", m, generation(), before["p"], gen)
	}
	t.Logf("p's lease ended at %v past the pause; it is still active at epoch %d", leaseEnd.Sub(answered).Round(time.Millisecond), before["p"].Epoch)

	// An impl pause too, then the leader dies: the new leader's first elements carry both.
	mark = []int{len(f1.elements())}
	controlsCall(t, fol, ring, admin.ActionPause, `{"impl":["payment"]}`)
	f1.waitElement(t, "paused_impl in an element", mark[0], func(el rawElement) bool {
		return paused(el) && slices.Equal(el.wire.Controls.PausedImpl, []string{"payment"})
	})
	pMark := len(p.elements())
	killed := c.KillLeader()
	next := c.WaitReady(DefaultWait)
	if next == killed {
		t.Fatalf("%s still leads", killed.ID)
	}
	for _, w := range []*rawWorker{f1, f2} {
		el, _ := w.waitElement(t, "an element from the new leader", 0, func(el rawElement) bool { return el.via == next.RSocketAddr() })
		want := share(t, 90, member(t, c, w))
		if got, ok := rate(el); !paused(el) || !slices.Equal(el.wire.Controls.PausedImpl, []string{"payment"}) || !ok || math.Abs(got-want) > 1e-9 {
			t.Fatalf("%s: the new leader's first element carries %+v, want the pauses and rate %v", w.id, el.wire.Controls, want)
		}
	}
	f1.waitElement(t, "three renewals from the new leader", len(f1.elements())+2, func(el rawElement) bool { return el.via == next.RSocketAddr() })
	if got := p.elements(); len(got) != pMark {
		t.Fatalf("p got %d elements from the new leader while the ring is paused", len(got)-pMark)
	}
	if m := member(t, c, p); m.State != admin.MemberActive || m.Epoch != before["p"].Epoch || !slices.Equal(m.Ranges, before["p"].Ranges) {
		t.Fatalf("p under the new leader: %+v, before %+v", m, before["p"])
	}

	// Resume through a follower of the new leader: p is renewed again, at its epoch.
	mark = []int{len(f1.elements())}
	a = controlsCall(t, follower(c), ring, admin.ActionResume, ``)
	if a.Controls.Paused || len(a.Controls.PausedImpl) != 0 || a.LeaderID != next.ID {
		t.Fatalf("resume: %+v", a)
	}
	el, _ := p.waitElement(t, "a renewal after the resume", pMark, func(rawElement) bool { return true })
	if el.wire.Epoch != before["p"].Epoch || el.wire.Controls != nil {
		t.Fatalf("p's renewal after the resume: %+v, want epoch %d without controls", el.wire, before["p"].Epoch)
	}
	f1.waitElement(t, "resumed in an element", mark[0], func(el rawElement) bool {
		return el.wire.Controls != nil && !el.wire.Controls.Paused && len(el.wire.Controls.PausedImpl) == 0
	})
	mark = []int{len(f1.elements())}
	controlsCall(t, next, ring, admin.ActionLimit, `{"clear":true}`)
	f1.waitElement(t, "no limit in an element", mark[0], func(el rawElement) bool { _, ok := rate(el); return !ok })
}
