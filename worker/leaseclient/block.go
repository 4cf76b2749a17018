package leaseclient

import (
	"context"
	"fmt"
	"strings"

	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"
)

// block waits for m's answer. rsocket-go's Block clones the answer before it returns it, and when
// the connection closes at that very moment the frame may already have gone back to its pool:
// reading it panics ("frame has been released!") on the caller's goroutine, which for a release
// or a report is a goroutine of the client's own, so the panic would end the worker process (seen
// with 200 clients in one process at a leader kill, bench/swarm). That is a lost connection.
//
// Only that panic is recovered: any other is a bug, and hiding it as a lost connection would keep
// it from ever being seen.
func block(ctx context.Context, m mono.Mono) (p payload.Payload, err error) {
	defer func() {
		if r := recover(); r != nil {
			if !releasedFrame(r) {
				panic(r)
			}
			p, err = nil, fmt.Errorf("%w: the answer was released by a closing connection (%v)", ErrDisconnected, r)
		}
	}()
	return m.Block(ctx)
}

// releasedFrame reports whether a recovered panic is rsocket-go's read of a frame that went back
// to its pool ("frame has been released!").
func releasedFrame(r any) bool {
	return strings.Contains(fmt.Sprint(r), "released")
}
