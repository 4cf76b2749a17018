package coordinator

import (
	"bytes"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/lease"
)

// FuzzRSocketServerRawBytes writes arbitrary bytes to the coordinator's RSocket port, on a fresh
// connection each time, and checks that the node survives (a panic in any of its goroutines
// would end the test binary) and still answers. The seeds are valid, truncated and hostile frame
// sequences; `go test -fuzz FuzzRSocketServerRawBytes ./coordinator` explores from them.
//
// Under -race, rsocket-go v0.8.16 itself reports a race when a connection dies (a bad frame, EOF)
// while an answer is being queued: DuplexConnection.Close closes its send queue while sendFrame
// sends to it (sendFrame recovers the panic, so it is harmless without -race). The seeds avoid
// that sequence: a request immediately followed by a connection-killing frame.
func FuzzRSocketServerRawBytes(f *testing.F) {
	setup := validSetup("fuzz")
	join := func(b ...[]byte) []byte { return bytes.Join(b, nil) }
	f.Add([]byte{})
	f.Add([]byte("garbage that is not rsocket at all"))
	f.Add(setup)
	f.Add(setup[:len(setup)-3])
	f.Add(join(setup, requestStreamFrame(1, lease.RouteLeases, []byte(`{}`))))
	f.Add(join(setup, requestResponseFrame(1, lease.RouteView, nil), requestResponseFrame(3, lease.RouteRelease, []byte(`{"worker_id":"fuzz","epoch":99}`))))
	f.Add(join(setup, requestResponseFrame(1, lease.RouteLeave, []byte(`{"worker_id":"fuzz"}`))))
	f.Add(join(setup, frameBytes(framing.NewWriteableRequestChannelFrame(1, 1, []byte(`{}`), composite(lease.RouteLeases), 0)),
		frameBytes(framing.NewWriteableCancelFrame(1))))
	f.Add(join(setup, frameBytes(framing.NewWriteableFireAndForgetFrame(1, []byte(`{}`), composite("x"), 0)),
		frameBytes(framing.NewWriteableMetadataPushFrame([]byte{1, 2, 3}))))
	f.Add(join(setup, requestStreamFrame(1, lease.RouteLeases, nil), frameBytes(framing.NewWriteableCancelFrame(1)),
		frameBytes(framing.NewWriteableRequestNFrame(1, 5, 0)), frameBytes(framing.NewWriteableRequestNFrame(7, 1, 0))))
	f.Add(join(setup, frameBytes(framing.NewWriteableErrorFrame(1, core.ErrorCodeApplicationError, []byte("x"))),
		frameBytes(framing.NewWriteableErrorFrame(0, core.ErrorCodeConnectionError, []byte("bye")))))
	f.Add(join(setup, frameBytes(framing.NewWriteableKeepaliveFrame(0, nil, true)), frameBytes(framing.NewWriteableLeaseFrame(time.Second, 1, nil))))
	f.Add(join(setup, frameBytes(framing.NewWriteablePayloadFrame(1, []byte(`{}`), nil, core.FlagNext|core.FlagFollow))))
	f.Add(frameBytes(framing.NewWriteableSetupFrame(core.DefaultVersion, time.Second, time.Second, []byte("token"),
		[]byte(lease.MetadataMIME), []byte(lease.DataMIME), []byte(`{}`), nil, true)))
	f.Add(frameBytes(framing.NewWriteableResumeFrame(core.DefaultVersion, []byte("token"), 0, 0)))
	f.Add(join(setup, setup))
	f.Add(join(setup, requestResponseFrame(1, "", nil)))
	f.Add(join(setup, []byte{0, 0, 1, 0}))

	// The fuzz function must not call f's methods, and a logger writing to f.Log would.
	c := newCluster(f, 1, func(_ int, cfg *Config) { cfg.Logger = zerolog.Nop() })
	leader := c.leader()
	addr := leader.RSocketAddr()
	f.Fuzz(func(t *testing.T, data []byte) {
		conn := dialRaw(t, addr)
		_, _ = conn.Write(data)
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var buf [4096]byte
		for {
			if _, err := conn.Read(buf[:]); err != nil {
				break
			}
		}
		_ = conn.Close()
		if !leader.IsLeader() {
			t.Fatal("the node lost its leadership")
		}
	})
}
