package rsclient

import (
	"context"
	"net"
	"sync"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/transport"
)

// Transport hands rsocket-go the open connection conn through a frame writer that serialises its
// callers and lets nothing but SETUP be the first frame.
func Transport(conn net.Conn) transport.ClientTransporter {
	return func(context.Context) (*transport.Transport, error) {
		return transport.NewTransport(&orderedConn{Conn: transport.NewTCPConn(conn)}), nil
	}
}

// orderedConn is rsocket-go's TCP frame connection with its writes under one lock. Reads stay
// unlocked: one goroutine reads, and reading shares nothing with writing.
type orderedConn struct {
	transport.Conn

	mu        sync.Mutex
	setupSent bool
}

// Write writes frame, or drops it when it is a KEEPALIVE and SETUP has not gone yet.
func (c *orderedConn) Write(frame core.WriteableFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.setupSent {
		switch frame.Header().Type() {
		case core.FrameTypeSetup:
			c.setupSent = true
		case core.FrameTypeKeepalive:
			return nil
		}
	}
	return c.Conn.Write(frame)
}

// Flush flushes what the writes buffered, under the writers' lock.
func (c *orderedConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.Flush()
}

// Addr is the peer's address, as rsocket-go's own TCP connection gives it.
func (c *orderedConn) Addr() string {
	if a, ok := c.Conn.(transport.AddrConn); ok {
		return a.Addr()
	}
	return ""
}
