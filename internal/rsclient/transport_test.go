package rsclient

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/transport"
	"github.com/rsocket/rsocket-go/payload"

	"github.com/retryring/retryring/internal/rsframe"
)

// slowDial is a transporter that takes three KEEPALIVE periods before it hands over conn, as a slow
// TLS handshake or a busy host would: rsocket-go's ticker has fired by the time its write loop runs.
func slowDial(conn net.Conn, period time.Duration, wrap func(net.Conn) transport.ClientTransporter) transport.ClientTransporter {
	return func(ctx context.Context) (*transport.Transport, error) {
		time.Sleep(3 * period)
		return wrap(conn)(ctx)
	}
}

// firstFrames accepts one connection on ln and returns the types of the first n frames it reads.
func firstFrames(t *testing.T, ln net.Listener, n int) <-chan []core.FrameType {
	t.Helper()
	out := make(chan []core.FrameType, 1)
	go func() {
		defer close(out)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var types []core.FrameType
		for len(types) < n {
			frame, err := rsframe.Read(c, rsframe.MaxLength)
			if err != nil {
				break
			}
			var h core.FrameHeader
			copy(h[:], frame)
			types = append(types, h.Type())
		}
		out <- types
	}()
	return out
}

// With a KEEPALIVE already due when the write loop starts, SETUP is still the first frame on the
// wire and the frames after it are whole (the server parses three), and the race detector sees no
// two writers in one buffer (run with -race: rsocket-go's own transport fails both ways).
func TestSetupGoesFirstEvenWhenAKeepaliveIsDue(t *testing.T) {
	const period = 10 * time.Millisecond
	for i := 0; i < 5; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		frames := firstFrames(t, ln, 3)
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		client, err := rsocket.Connect().
			KeepAlive(period, time.Minute, 1).
			SetupPayload(payload.NewString("setup", "")).
			Transport(slowDial(conn, period, Transport)).
			Start(ctx)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		got := <-frames
		cancel()
		_ = client.Close()
		_ = ln.Close()
		if len(got) < 3 {
			t.Fatalf("run %d: the server parsed %d whole frames (%v), want 3", i, len(got), got)
		}
		if got[0] != core.FrameTypeSetup {
			t.Fatalf("run %d: the first frame is %v, want SETUP (then %v)", i, got[0], got[1:])
		}
		for _, ft := range got[1:] {
			if ft != core.FrameTypeKeepalive {
				t.Fatalf("run %d: frames %v, want SETUP then KEEPALIVEs", i, got)
			}
		}
	}
}
