package leaseclient

import (
	"context"
	"errors"
	"testing"

	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"
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
