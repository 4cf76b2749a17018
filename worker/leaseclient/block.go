package leaseclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/panjf2000/ants/v2"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"
)

// block waits for m's answer. Every request of the client goes through here (session.call), and
// rsocket-go v0.8.16 can panic on the caller's goroutine in two ways when the connection closes
// under a request; both are a lost connection, not a crash:
//
//   - The answer released. Block clones the answer before it returns it, and when the connection
//     closes at that very moment the frame may already have gone back to its pool: reading it
//     panics ("frame has been released!"). Seen with 200 clients in one process at a leader kill.
//
//   - The request scheduler released (ants.ErrPoolClosed, "this pool has been closed"). A client
//     connection built without a Scheduler gets a pool of its own (ants, through reactor-go's
//     elastic scheduler), and DuplexConnection.Close releases that pool after it has errored the
//     requests it knows of. The sequence: RequestResponse finds the connection open, registers the
//     request, queues its frame and returns a processor mono bound to the pool; the connection
//     then closes (rsocket-go's read goroutine after the coordinator died, or session.close on
//     another goroutine) and releases the pool; then Block subscribes, reactor-go's
//     processor.SubscribeWith submits the subscription to the pool, Submit answers ErrPoolClosed,
//     and the processor panics with it on the goroutine that called Block. A subscription that
//     reached the pool before the close is answered by the close with the connection's error, and
//     a RequestResponse after the close returns an error mono: neither panics. The library's own
//     goroutines never submit to that pool in a way that panics for this client (it answers no
//     requests: mustExecute falls back to a goroutine, and nothing subscribes a channel's
//     receiving side), so this recover is the whole fix. Seen with 1,000 clients at a leader kill
//     (bench/swarm), under a release's ack.
//
// Only these panics are recovered: any other is a bug, and hiding it as a lost connection would
// keep it from ever being seen. (The same pool can also answer ErrPoolOverload when closed under
// a Submit waiting for one of its 1,000 workers; a session never has that many requests waiting.)
func block(ctx context.Context, m mono.Mono) (p payload.Payload, err error) {
	defer func() {
		r := recover()
		switch {
		case r == nil:
		case releasedFrame(r):
			p, err = nil, fmt.Errorf("%w: the answer was released by a closing connection (%v)", ErrDisconnected, r)
		case releasedScheduler(r):
			p, err = nil, fmt.Errorf("%w: the connection closed before its answer was awaited: %w", ErrDisconnected, r.(error))
		default:
			panic(r)
		}
	}()
	return m.Block(ctx)
}

// releasedFrame reports whether a recovered panic is rsocket-go's read of a frame that went back
// to its pool ("frame has been released!").
func releasedFrame(r any) bool {
	return strings.Contains(fmt.Sprint(r), "released")
}

// releasedScheduler reports whether a recovered panic is reactor-go's subscription to a request
// whose connection released its scheduler's pool.
func releasedScheduler(r any) bool {
	err, ok := r.(error)
	return ok && errors.Is(err, ants.ErrPoolClosed)
}
