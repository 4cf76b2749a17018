package flood

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"github.com/rsocket/rsocket-go/extension"

	"github.com/retryring/retryring/internal/rsframe"
	"github.com/retryring/retryring/lease"
)

// Config is one flood.
type Config struct {
	// Addrs are the RSocket addresses flooded, in turn.
	Addrs []string
	// GarbagePerSecond connections send garbage or nothing; SetupsPerSecond send a SETUP
	// without a valid token and a ring.leases request.
	GarbagePerSecond int
	SetupsPerSecond  int
	// Ring and WorkerIDs are what the SETUPs claim (the real workers' ring and ids).
	Ring      lease.RingKey
	WorkerIDs []string
	// MaxInFlight bounds the connections open at once on the flood's side; beyond it a tick's
	// connections are skipped (and counted). Default 4096.
	MaxInFlight int
}

// Stats is what the flood sent and what came back.
type Stats struct {
	Garbage, Setups int64 // connections opened
	DialErrors      int64 // connections refused or reset before anything was sent
	Skipped         int64 // not opened: MaxInFlight were open
	// Refused counts the SETUPs answered with an error frame, by its error code ("" when the
	// data was not an error body); Accepted those answered with a lease element (never, with
	// worker tokens on); Closed those whose connection closed without an answer.
	Refused  map[string]int64
	Accepted int64
	Closed   int64
}

type counters struct {
	garbage, setups, dialErrors, skipped, accepted, closed atomic.Int64
	mu                                                     sync.Mutex
	refused                                                map[string]int64
}

// Run floods until ctx ends and returns what it counted once every connection it opened closed.
func Run(ctx context.Context, cfg Config) Stats {
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 4096
	}
	c := &counters{refused: map[string]int64{}}
	sem := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup
	launch := func(fn func(string, *rand.Rand), addr string, seed uint64) {
		select {
		case sem <- struct{}{}:
		default:
			c.skipped.Add(1)
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(addr, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		}()
	}
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	// The rates are kept over the whole run, not per tick: a ticker drops the ticks of a loop
	// that falls behind, and a flood that silently sent less would flatter the coordinator.
	start := time.Now()
	var garbageSent, setupsSent int64
	var n uint64
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return c.stats()
		case <-t.C:
		}
		elapsed := time.Since(start).Seconds()
		garbageDue := int64(float64(cfg.GarbagePerSecond)*elapsed) - garbageSent
		setupsDue := int64(float64(cfg.SetupsPerSecond)*elapsed) - setupsSent
		garbageSent += garbageDue
		setupsSent += setupsDue
		for ; garbageDue >= 1; garbageDue-- {
			n++
			launch(func(a string, r *rand.Rand) { c.garbageConn(ctx, a, r) }, cfg.Addrs[n%uint64(len(cfg.Addrs))], n)
		}
		for ; setupsDue >= 1; setupsDue-- {
			n++
			id := "flood"
			if len(cfg.WorkerIDs) > 0 {
				id = cfg.WorkerIDs[n%uint64(len(cfg.WorkerIDs))]
			}
			launch(func(a string, r *rand.Rand) { c.badSetup(ctx, a, cfg.Ring, id, r) }, cfg.Addrs[n%uint64(len(cfg.Addrs))], n)
		}
	}
}

func (c *counters) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	refused := make(map[string]int64, len(c.refused))
	for k, v := range c.refused {
		refused[k] = v
	}
	return Stats{Garbage: c.garbage.Load(), Setups: c.setups.Load(), DialErrors: c.dialErrors.Load(),
		Skipped: c.skipped.Load(), Refused: refused, Accepted: c.accepted.Load(), Closed: c.closed.Load()}
}

// answerWait bounds how long a flood connection waits for the coordinator to answer or close.
const answerWait = 3 * time.Second

func dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// garbageConn opens a connection and sends one of: nothing; random bytes; a frame header that
// announces 16 MiB followed by a little; a valid frame that is not a SETUP. Then it waits for
// the coordinator to close it.
func (c *counters) garbageConn(ctx context.Context, addr string, r *rand.Rand) {
	c.garbage.Add(1)
	conn, err := dial(ctx, addr)
	if err != nil {
		if ctx.Err() == nil {
			c.dialErrors.Add(1)
		}
		return
	}
	defer conn.Close()
	var out []byte
	switch r.IntN(4) {
	case 0: // nothing
	case 1:
		out = make([]byte, 1+r.IntN(512))
		for i := range out {
			out[i] = byte(r.Uint32())
		}
	case 2:
		out = append([]byte{0xff, 0xff, 0xff}, make([]byte, 1024)...)
	case 3:
		out = frame(framing.NewWriteableRequestResponseFrame(1, []byte(`{}`), nil, 0))
	}
	if len(out) > 0 {
		_ = conn.SetWriteDeadline(time.Now().Add(answerWait))
		_, _ = conn.Write(out)
	}
	_ = conn.SetReadDeadline(time.Now().Add(answerWait))
	_, _ = io.Copy(io.Discard, conn)
}

// badSetup sends a SETUP with no token or a random one, claiming id, and a ring.leases request,
// and reads the answer.
func (c *counters) badSetup(ctx context.Context, addr string, ring lease.RingKey, id string, r *rand.Rand) {
	c.setups.Add(1)
	conn, err := dial(ctx, addr)
	if err != nil {
		if ctx.Err() == nil {
			c.dialErrors.Add(1)
		}
		return
	}
	defer conn.Close()
	var token string
	if r.IntN(2) == 1 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		token = hex.EncodeToString(b)
	}
	var inc [8]byte
	for i := range inc {
		inc[i] = byte(r.Uint32())
	}
	data, _ := json.Marshal(lease.Setup{WorkerID: id, Incarnation: "flood-" + hex.EncodeToString(inc[:]),
		Region: ring.Region, Cluster: ring.Cluster, Service: ring.Service, Token: token})
	setup := frame(framing.NewWriteableSetupFrame(core.DefaultVersion, 100*time.Millisecond, time.Second, nil,
		[]byte(lease.MetadataMIME), []byte(lease.DataMIME), data, nil, false))
	stream := frame(framing.NewWriteableRequestStreamFrame(1, 1, []byte(`{}`), routing(lease.RouteLeases), 0))
	_ = conn.SetDeadline(time.Now().Add(answerWait))
	if _, err := conn.Write(append(setup, stream...)); err != nil {
		c.closed.Add(1)
		return
	}
	for {
		f, err := readFrame(conn)
		if err != nil {
			c.closed.Add(1)
			return
		}
		switch ff := f.(type) {
		case *framing.ErrorFrame:
			code := ""
			var we *lease.WireError
			if errors.As(lease.FromWire(ff.ErrorData()), &we) {
				code = we.Code
			}
			c.mu.Lock()
			c.refused[code]++
			c.mu.Unlock()
			return
		case *framing.PayloadFrame:
			c.accepted.Add(1)
			return
		}
	}
}

func frame(f core.WriteableFrame) []byte {
	n := f.Len()
	b := make([]byte, 3, 3+n)
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
	w := &appender{b: b}
	_, _ = f.WriteTo(w)
	return w.b
}

type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) { a.b = append(a.b, p...); return len(p), nil }

func routing(route string) []byte {
	tags, _ := extension.EncodeRouting(route)
	md, _ := extension.NewCompositeMetadataBuilder().PushWellKnown(extension.MessageRouting, tags).Build()
	return md
}

// readFrame reads one length-prefixed frame (at most 64 KiB: the coordinator's answers are small).
func readFrame(conn net.Conn) (core.BufferedFrame, error) {
	body, err := rsframe.Read(conn, 64<<10)
	if err != nil {
		return nil, err
	}
	return framing.FromBytes(body)
}
