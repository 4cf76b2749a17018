package leaseclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/panjf2000/ants/v2"
	"github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"

	"github.com/retryring/retryring/lease"
)

// releasedMono answers Block as rsocket-go does when the connection closed under the answer.
type releasedMono struct{ mono.Mono }

func (releasedMono) Block(context.Context) (payload.Payload, error) {
	panic("frame has been released!")
}

// TestBlockTurnsAReleasedAnswerIntoALostConnection: the panic stays inside the request.
func TestBlockTurnsAReleasedAnswerIntoALostConnection(t *testing.T) {
	p, err := block(context.Background(), releasedMono{})
	if p != nil || !errors.Is(err, ErrDisconnected) {
		t.Fatalf("block = %v, %v; want no payload and ErrDisconnected", p, err)
	}
	p, err = block(context.Background(), mono.Just(payload.NewString("ok", "")))
	if err != nil || p == nil || p.DataUTF8() != "ok" {
		t.Fatalf("block of a plain answer = %v, %v", p, err)
	}
}

// otherPanicMono panics as a bug would.
type otherPanicMono struct{ mono.Mono }

func (otherPanicMono) Block(context.Context) (payload.Payload, error) {
	panic("index out of range")
}

// TestBlockLetsOtherPanicsThrough: only the released frame is a lost connection; any other panic
// is a bug and must not be hidden as one.
func TestBlockLetsOtherPanicsThrough(t *testing.T) {
	defer func() {
		if r := recover(); r != "index out of range" {
			t.Fatalf("recovered %v, want the other panic to come through", r)
		}
	}()
	_, err := block(context.Background(), otherPanicMono{})
	t.Fatalf("block returned %v instead of panicking", err)
}

// closeAfterRequest is a real rsocket-go connection that closes, as rsocket-go's read goroutine
// closes it when the coordinator dies, between a request-response being sent and its answer being
// awaited: after RequestResponse has returned its mono, before Block subscribes to it.
type closeAfterRequest struct{ rsocket.Client }

func (c closeAfterRequest) RequestResponse(p payload.Payload) mono.Mono {
	m := c.Client.RequestResponse(p)
	_ = c.Client.Close() // releases the connection's request scheduler (its ants pool)
	return m
}

// TestRequestOnAConnectionClosedBeforeItsAnswerIsAwaited: the close releases the pool that Block
// would subscribe on; reactor-go then panics with ants.ErrPoolClosed on the requesting goroutine
// (bench/swarm, 1,000 clients at a leader kill, under a release's ack). The request must end as a
// lost connection that says what happened, not crash the process.
func TestRequestOnAConnectionClosedBeforeItsAnswerIsAwaited(t *testing.T) {
	hole := startBlackHole(t) // takes SETUP and the request, never answers: nothing races the close
	c, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := c.dial(ctx, hole.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	sess.sock = closeAfterRequest{sess.sock}

	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("ack on a connection closed before its answer was awaited panicked: %v", r)
		}
	}()
	err = sess.ack(ctx, lease.RouteRelease, lease.ReleaseRequest{WorkerID: "w", Epoch: 1})
	if !errors.Is(err, ErrDisconnected) || !errors.Is(err, ants.ErrPoolClosed) {
		t.Fatalf("ack = %v; want ErrDisconnected wrapping ants.ErrPoolClosed", err)
	}
	t.Logf("ack: %v", err)
}
