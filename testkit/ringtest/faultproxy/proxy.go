package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Errors of Dial. Both look to the caller like a failed connect, which is what they model.
var (
	// ErrCut means the proxy is cut off: no connection goes through until Heal.
	ErrCut = errors.New("faultproxy: cut off")
	// ErrClosed means the proxy was closed.
	ErrClosed = errors.New("faultproxy: closed")
)

// Mode is the state of a proxy's network.
type Mode int

// Modes of a proxy.
const (
	// Normal forwards every byte.
	Normal Mode = iota
	// Hung keeps connections open and forwards nothing.
	Hung
	// Cut closes connections and refuses new ones.
	Cut
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Normal:
		return "normal"
	case Hung:
		return "hung"
	case Cut:
		return "cut"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

const (
	// dialTimeout bounds a connect to the target: loopback answers at once or never.
	dialTimeout = 5 * time.Second
	// classifyTimeout bounds the wait for the bytes a Classifier asks for.
	classifyTimeout = 5 * time.Second
	// bufferSize is each pump's chunk, and what an inbound connection may send before it is forwarded.
	bufferSize = 64 << 10
)

// Classifier names, from the first bytes of an inbound connection, the other proxies that
// connection also passes through: typically the network of the party that connected, recognized by
// its handshake. peek returns the next n bytes without consuming them (they are forwarded later).
type Classifier func(peek func(n int) ([]byte, error)) []*Proxy

// Proxy is one party's network. Use New or Listen.
type Proxy struct {
	ln   net.Listener // nil for a proxy that only dials or only controls
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	target   string
	classify Classifier
	mode     Mode
	resume   chan struct{} // closed when a Hang ends; nil unless hung
	links    map[*link]struct{}
	pending  map[net.Conn]struct{} // inbound connections not yet forwarded
	held     int                   // of those, the ones waiting for a Hang to end
	closed   bool
}

// link is one forwarded connection: down faces the party that connected, up the party connected to.
// It obeys every proxy in via: it flows only while all of them do.
type link struct {
	down, up net.Conn
	via      []*Proxy
	done     chan struct{}
	once     sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.down.Close()
		_ = l.up.Close()
	})
}

// New returns a proxy without a listener: it carries outbound connections through Dial, and can be
// named by another proxy's Classifier so that inbound connections of its party obey it.
func New() *Proxy {
	return &Proxy{stop: make(chan struct{}), links: map[*link]struct{}{}, pending: map[net.Conn]struct{}{}}
}

// Listen returns a proxy listening on 127.0.0.1:0 that forwards every connection to target, and that
// can also carry outbound connections through Dial.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := New()
	p.ln, p.target = ln, target
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address to connect to instead of the target ("" for a proxy made by New).
func (p *Proxy) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// SetTarget changes where new inbound connections go (a restarted peer on a new port); current
// connections keep theirs.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// SetClassifier makes every new inbound connection also obey the proxies c names.
func (p *Proxy) SetClassifier(c Classifier) {
	p.mu.Lock()
	p.classify = c
	p.mu.Unlock()
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Conns is the number of connections currently carried that obey this proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Held is the number of inbound connections accepted but not yet forwarded because a proxy on their
// path is hung.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Hang stops forwarding in both directions, connections staying open. A chunk that was already read
// when Hang was called may still be delivered, as bytes already on the wire would be.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == Hung {
		return
	}
	p.mode = Hung
	p.resume = make(chan struct{})
}

// Cut closes every current connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.endHang()
	p.mode = Cut
	links := p.takeLinks()
	pending := p.takePending()
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	for _, c := range pending {
		reset(c)
	}
}

// Heal returns to normal: held bytes flow again and new connections go through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endHang()
	p.mode = Normal
}

// Close closes the listener and every connection that obeys this proxy, and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	p.endHang()
	links := p.takeLinks()
	pending := p.takePending()
	p.mu.Unlock()
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for _, l := range links {
		l.close()
	}
	for _, c := range pending {
		reset(c)
	}
	p.wg.Wait()
	return err
}

// endHang wakes everything waiting for a Hang to end. p.mu must be held.
func (p *Proxy) endHang() {
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// takeLinks empties the link set. p.mu must be held.
func (p *Proxy) takeLinks() []*link {
	out := make([]*link, 0, len(p.links))
	for l := range p.links {
		out = append(out, l)
	}
	p.links = map[*link]struct{}{}
	return out
}

// takePending empties the set of inbound connections not yet forwarded. p.mu must be held.
func (p *Proxy) takePending() []net.Conn {
	out := make([]net.Conn, 0, len(p.pending))
	for c := range p.pending {
		out = append(out, c)
	}
	p.pending = map[net.Conn]struct{}{}
	return out
}

// state reads what decides whether bytes flow through p.
func (p *Proxy) state() (mode Mode, resume chan struct{}, closed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.resume, p.closed
}

// blocked returns nil if every proxy in via lets bytes through, a channel to wait on if one is hung,
// and an error if one is cut or closed.
func blocked(via []*Proxy) (<-chan struct{}, error) {
	for _, p := range via {
		mode, resume, closed := p.state()
		switch {
		case closed:
			return nil, ErrClosed
		case mode == Cut:
			return nil, ErrCut
		case mode == Hung:
			return resume, nil
		}
	}
	return nil, nil
}

// Dial connects to addr through the proxy: the returned connection obeys Hang, Cut and Close like an
// inbound one. While hung, Dial waits (a connect into a black hole) until Heal or ctx ends.
func (p *Proxy) Dial(ctx context.Context, addr string) (net.Conn, error) {
	via := []*Proxy{p}
	for {
		wait, err := blocked(via)
		if err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-p.stop:
		case <-ctx.Done():
			return nil, fmt.Errorf("dial %s: %w", addr, ctx.Err())
		}
	}
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	inner, outer, err := tcpPair(ctx)
	if err != nil {
		_ = up.Close()
		return nil, err
	}
	if err := p.attach(outer, up, via); err != nil {
		_ = inner.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return inner, nil
}

// tcpPair returns the two ends of a fresh loopback TCP connection, so that an outbound connection
// has the kernel buffering and close semantics of a real one.
func tcpPair(ctx context.Context) (net.Conn, net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("faultproxy: pair: %w", err)
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	var d net.Dialer
	a, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		if r := <-ch; r.c != nil {
			_ = r.c.Close()
		}
		return nil, nil, fmt.Errorf("faultproxy: pair: %w", err)
	}
	r := <-ch
	if r.err != nil {
		_ = a.Close()
		return nil, nil, fmt.Errorf("faultproxy: pair: %w", r.err)
	}
	return a, r.c, nil
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.mu.Lock()
		refuse := p.closed || p.mode == Cut
		if !refuse {
			p.wg.Add(1)
			p.pending[c] = struct{}{}
		}
		p.mu.Unlock()
		if refuse {
			reset(c)
			continue
		}
		go p.forward(c)
	}
}

// forward connects an accepted connection to the target once every network on its path lets it
// through. While one is hung, the connection is accepted (as a kernel would for a stopped process)
// but nothing reaches the target until Heal, and a client that gives up meanwhile never reaches it.
func (p *Proxy) forward(down net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.pending, down)
		p.mu.Unlock()
	}()
	br := bufio.NewReaderSize(down, bufferSize)
	conn := &bufferedConn{Conn: down, r: br}
	via := []*Proxy{p}
	p.mu.Lock()
	classify := p.classify
	p.mu.Unlock()
	if classify != nil {
		peek := func(n int) ([]byte, error) {
			_ = down.SetReadDeadline(time.Now().Add(classifyTimeout))
			defer func() { _ = down.SetReadDeadline(time.Time{}) }()
			return br.Peek(n)
		}
		via = append(via, classify(peek)...)
	}
	if err := p.holdUntilFlowing(down, br, via); err != nil {
		reset(down)
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		reset(down)
		return
	}
	if err := p.attach(conn, up, via); err != nil {
		reset(down)
	}
}

// errGone means the client closed a connection that was still waiting for a Hang to end.
var errGone = errors.New("faultproxy: client went away")

// holdUntilFlowing waits until no proxy in via is hung. Meanwhile it watches the client through br
// (peeking, so that nothing is consumed) and gives up if the client closes.
func (p *Proxy) holdUntilFlowing(down net.Conn, br *bufio.Reader, via []*Proxy) error {
	wait, err := blocked(via)
	if err != nil || wait == nil {
		return err
	}
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}()
	gone := make(chan struct{})
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			_, err := br.Peek(br.Buffered() + 1)
			select {
			case <-stopWatch:
				return
			default:
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				return // a talkative client: stop watching, it is still there
			}
			if err != nil {
				close(gone)
				return
			}
		}
	}()
	defer func() {
		close(stopWatch)
		_ = down.SetReadDeadline(time.Now()) // interrupts the watcher's Peek
		<-watched
		_ = down.SetReadDeadline(time.Time{})
	}()
	for wait != nil {
		select {
		case <-wait:
		case <-gone:
			return errGone
		case <-p.stop:
			return ErrClosed
		}
		if wait, err = blocked(via); err != nil {
			return err
		}
	}
	return nil
}

// bufferedConn reads through the reader that peeked at the connection's first bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// attach registers a link with every proxy in via and starts its two pumps, unless one of them was
// cut or closed meanwhile. The pumps belong to p's wait group.
func (p *Proxy) attach(down, up net.Conn, via []*Proxy) error {
	l := &link{down: down, up: up, via: via, done: make(chan struct{})}
	var joined []*Proxy
	fail := func(err error) error {
		for _, q := range joined {
			q.drop(l)
		}
		l.close()
		return err
	}
	for _, q := range via {
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return fail(ErrClosed)
		case q.mode == Cut:
			q.mu.Unlock()
			return fail(ErrCut)
		}
		q.links[l] = struct{}{}
		q.mu.Unlock()
		joined = append(joined, q)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fail(ErrClosed)
	}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pump(l, down, up)
	go p.pump(l, up, down)
	return nil
}

// pump copies src to dst, holding each chunk (and the end of the stream) while a proxy on the path is
// hung.
func (p *Proxy) pump(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		l.close()
		for _, q := range l.via {
			q.drop(l)
		}
	}()
	buf := make([]byte, bufferSize)
	for {
		n, err := src.Read(buf)
		if !flowing(l) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// flowing waits while a proxy on the link's path is hung; false means the link must end.
func flowing(l *link) bool {
	for {
		wait, err := blocked(l.via)
		if err != nil {
			return false
		}
		if wait == nil {
			return true
		}
		select {
		case <-wait:
		case <-l.done:
			return false
		}
	}
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// reset closes c with an RST rather than a FIN: a refused or broken connection, not a polite close.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
