package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// quiet is how long a test listens to conclude that nothing arrives. It only bounds how long an
// absence is observed; no test depends on something happening within it.
const quiet = 150 * time.Millisecond

// echoServer accepts connections and echoes every line; it counts accepted connections.
type echoServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	accepted int
	conns    []net.Conn
	closed   chan string // the remote address of each connection that reached EOF
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln, closed: make(chan string, 16)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.accepted++
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				e.closed <- c.RemoteAddr().String()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

func (e *echoServer) acceptedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accepted
}

func listen(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes a line and reads it back, failing the test on error.
func roundTrip(t *testing.T, c net.Conn, line string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got != line+"\n" {
		t.Fatalf("echo = %q, want %q", got, line)
	}
}

// expectSilence asserts that nothing arrives on c for a while, then clears the deadline.
func expectSilence(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	buf := make([]byte, 1)
	n, err := c.Read(buf)
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("expected silence, got n=%d err=%v", n, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

// expectRefused asserts that a connection to addr is refused: the connect fails, or the connection
// is closed at once (the proxy accepts, then resets).
func expectRefused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connect timed out instead of being refused: %v", err)
		}
		return
	}
	defer c.Close()
	expectClosed(t, c)
}

// expectClosed asserts that c reads EOF or a reset (not a timeout).
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	_, err := c.Read(buf)
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("expected a closed connection, got %v", err)
	}
}

func TestForwardsBothWays(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "hello")
	roundTrip(t, c, strings.Repeat("x", 100_000))
	if p.Mode() != Normal {
		t.Fatalf("mode = %v", p.Mode())
	}
}

func TestHangHoldsBytesUntilHeal(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")
	p.Hang()
	if _, err := io.WriteString(c, "during\n"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c)
	if p.Conns() != 1 {
		t.Fatalf("a hung proxy must keep its connection open, has %d", p.Conns())
	}
	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "during\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
}

func TestHangHoldsNewConnectionsAndTheEndOfStream(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	p.Hang()
	c := dial(t, p.Addr()) // the connect itself succeeds, as a stopped process's kernel accepts
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c)
	if n := e.acceptedCount(); n != 0 {
		t.Fatalf("target saw %d connections through a hung proxy", n)
	}
	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}

	// A close during a Hang reaches the target only after Heal.
	p.Hang()
	_ = c.Close()
	select {
	case addr := <-e.closed:
		t.Fatalf("target saw the end of %s through a hung proxy", addr)
	case <-time.After(quiet):
	}
	p.Heal()
	select {
	case <-e.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of the stream never reached the target after heal")
	}
}

func TestCutClosesAndRefusesUntilHeal(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")
	p.Cut()
	expectClosed(t, c)
	if p.Conns() != 0 {
		t.Fatalf("cut proxy still carries %d connections", p.Conns())
	}
	expectRefused(t, p.Addr())
	if _, err := p.Dial(context.Background(), e.addr()); !errors.Is(err, ErrCut) {
		t.Fatalf("Dial while cut: %v, want ErrCut", err)
	}
	p.Heal()
	roundTrip(t, dial(t, p.Addr()), "after")
}

func TestCutEndsAHang(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")
	p.Hang()
	pending := dial(t, p.Addr())
	p.Cut()
	expectClosed(t, c)
	expectClosed(t, pending)
}

func TestDialObeysTheControls(t *testing.T) {
	e := newEcho(t)
	p := New()
	defer p.Close()
	if p.Addr() != "" {
		t.Fatalf("a dial-only proxy has no address, got %q", p.Addr())
	}
	ctx := context.Background()
	c, err := p.Dial(ctx, e.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "out")

	p.Hang()
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, c)
	short, cancel := context.WithTimeout(ctx, quiet)
	_, err = p.Dial(short, e.addr())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial while hung: %v, want it to wait until the context ends", err)
	}

	// A Dial waiting on a Hang goes through once healed.
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := p.Dial(ctx, e.addr())
		done <- result{c, err}
	}()
	p.Heal()
	r := <-done
	if r.err != nil {
		t.Fatalf("Dial after heal: %v", r.err)
	}
	defer r.c.Close()
	roundTrip(t, r.c, "healed")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("held bytes after heal: %q, %v", got, err)
	}

	p.Cut()
	expectClosed(t, c)
	expectClosed(t, r.c)
}

func TestSetTargetMovesNewConnections(t *testing.T) {
	a, b := newEcho(t), newEcho(t)
	p := listen(t, a.addr())
	roundTrip(t, dial(t, p.Addr()), "to a")
	p.SetTarget(b.addr())
	roundTrip(t, dial(t, p.Addr()), "to b")
	if a.acceptedCount() != 1 || b.acceptedCount() != 1 {
		t.Fatalf("accepted a=%d b=%d, want 1 and 1", a.acceptedCount(), b.acceptedCount())
	}
}

func TestCloseEndsEverything(t *testing.T) {
	e := newEcho(t)
	p, err := Listen(e.addr())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	roundTrip(t, c, "x")
	p.Hang()
	hung := dial(t, p.Addr())
	waiting := make(chan error, 1)
	go func() {
		_, err := p.Dial(context.Background(), e.addr())
		waiting <- err
	}()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial waiting on a hang when closed: %v, want ErrClosed", err)
	}
	expectClosed(t, c)
	expectClosed(t, hung)
	if _, err := p.Dial(context.Background(), e.addr()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// A goroutine that Close released (the test's own Dial above) may still be on its way out when
	// the stacks are read: a leak stays, so look again for a moment before calling it one.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := proxyGoroutines()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d proxy goroutines left after Close", n)
		}
	}
}

// proxyGoroutines counts goroutines running proxy code.
func proxyGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*Proxy)") {
			n++
		}
	}
	return n
}

// byFirstLine classifies a connection by its first line: the name of the party that connected.
func byFirstLine(parties map[string]*Proxy) Classifier {
	return func(peek func(n int) ([]byte, error)) []*Proxy {
		for n := 1; n < 64; n++ {
			b, err := peek(n)
			if err != nil {
				return nil
			}
			if b[n-1] == '\n' {
				if p := parties[string(b[:n-1])]; p != nil {
					return []*Proxy{p}
				}
				return nil
			}
		}
		return nil
	}
}

func TestClassifiedConnectionsObeyTheirPartysProxy(t *testing.T) {
	e := newEcho(t)
	w, x := New(), New()
	defer w.Close()
	defer x.Close()
	p := listen(t, e.addr())
	p.SetClassifier(byFirstLine(map[string]*Proxy{"w": w, "x": x}))

	cw, cx := dial(t, p.Addr()), dial(t, p.Addr())
	roundTrip(t, cw, "w") // the first line names the party and is forwarded like any other
	roundTrip(t, cx, "x")
	if w.Conns() != 1 || x.Conns() != 1 || p.Conns() != 2 {
		t.Fatalf("conns w=%d x=%d p=%d, want 1 1 2", w.Conns(), x.Conns(), p.Conns())
	}

	w.Hang()
	if _, err := io.WriteString(cw, "held\n"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, cw)
	roundTrip(t, cx, "x still flows")

	// A new connection of the hung party is held before it reaches the target, and never reaches it
	// if the party gives up meanwhile.
	before := e.acceptedCount()
	gaveUp := dial(t, p.Addr())
	if _, err := io.WriteString(gaveUp, "w\n"); err != nil {
		t.Fatal(err)
	}
	expectSilence(t, gaveUp)
	if p.Held() != 1 {
		t.Fatalf("held = %d, want the new connection held", p.Held())
	}
	_ = gaveUp.Close()
	waitFor(t, func() bool { return p.Held() == 0 })
	w.Heal()
	_ = cw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(cw).ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
	roundTrip(t, dial(t, p.Addr()), "x") // a connection made after the heal: the target's next accept
	if got := e.acceptedCount(); got != before+1 {
		t.Fatalf("target accepted %d connections since the hang, want 1 (the one that gave up must not arrive)", got-before)
	}

	w.Cut()
	expectClosed(t, cw)
	roundTrip(t, cx, "x survives w's cut")
	refused := dial(t, p.Addr())
	if _, err := io.WriteString(refused, "w\n"); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, refused)
	w.Heal()
	roundTrip(t, dial(t, p.Addr()), "w")
}

func TestClassifierSeesNothingFromASilentClient(t *testing.T) {
	e := newEcho(t)
	p := listen(t, e.addr())
	called := make(chan struct{}, 1)
	p.SetClassifier(func(peek func(n int) ([]byte, error)) []*Proxy {
		called <- struct{}{}
		b, err := peek(1)
		if err == nil {
			t.Errorf("peek of a closed client returned %q", b)
		}
		return nil
	})
	c := dial(t, p.Addr())
	<-called
	_ = c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseAndCutEndAConnectionBeingClassified(t *testing.T) {
	for _, how := range []string{"close", "cut"} {
		t.Run(how, func(t *testing.T) {
			e := newEcho(t)
			p := listen(t, e.addr())
			entered := make(chan struct{})
			peeked := make(chan error, 1)
			p.SetClassifier(func(peek func(n int) ([]byte, error)) []*Proxy {
				close(entered)
				_, err := peek(1) // the client sends nothing
				peeked <- err
				return nil
			})
			c := dial(t, p.Addr())
			<-entered
			if how == "close" {
				_ = p.Close()
			} else {
				p.Cut()
			}
			err := <-peeked
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("peek ended with %v, want the connection closed under it", err)
			}
			expectClosed(t, c)
			if got := e.acceptedCount(); got != 0 {
				t.Fatalf("target accepted %d connections", got)
			}
		})
	}
}
