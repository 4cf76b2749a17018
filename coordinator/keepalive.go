package coordinator

import (
	"net"
	"sync"

	"github.com/retryring/retryring/internal/rsframe"
)

// keepaliveConn answers the workers' KEEPALIVE frames on the connection's read goroutine (issue
// 19, item 4); rsocket-go reads and writes the connection through it, above TLS if any.
//
// Every worker sends a KEEPALIVE frame with the respond flag several times a second, and the
// coordinator must answer each with the same frame without the flag (docs/protocol.md section 3).
// rsocket-go answers it on its write goroutine: the read goroutine decodes the frame, allocates
// the answer and hands it over a channel, the write goroutine wakes, writes it and parks again. At
// 1,000 steady workers that hand-over was about a fifth of the leader's CPU (docs/benchmarks.md,
// figure 10, profiled). The answer is the frame itself with the respond flag cleared, so Read
// writes it as soon as it reads the frame, and hands rsocket-go only the other frames. The write
// waits for rsocket-go's write goroutine to finish the frame it is writing (one frame can be split
// over several Write calls); while it is in the middle of one, the KEEPALIVE is left to
// rsocket-go, which answers it as before. A KEEPALIVE without the respond flag (the lease client
// asks for an answer on every other one only) is taken too and not answered: it is a sign of life,
// which the silenceConn below saw when it was read. The connection's first frame is never taken:
// rsocket-go requires SETUP there and refuses anything else.
type keepaliveConn struct {
	net.Conn
	// in follows the frames read; only Read uses it.
	in frameCursor
	// wmu orders rsocket-go's writes and the answers Read writes; out follows the frames
	// written, so that an answer never lands inside another frame.
	wmu       sync.Mutex
	out       rsframe.Cursor
	answerBuf []byte
}

func (c *keepaliveConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if n == 0 {
			return n, err
		}
		rest, werr := c.answerKeepalives(b[:n])
		if werr != nil {
			return 0, werr
		}
		// A read of nothing but KEEPALIVE frames is a sign of life, not data: read on (the
		// silenceConn below sets a new silence deadline) rather than hand rsocket-go an empty read.
		if len(rest) > 0 || err != nil {
			return len(rest), err
		}
	}
}

// answerKeepalives answers the KEEPALIVE frames of b, just read, and returns the rest of b. It
// answers none while rsocket-go's write goroutine is in the middle of a frame: they stay in b and
// rsocket-go answers them.
func (c *keepaliveConn) answerKeepalives(b []byte) ([]byte, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.out.AtBoundary() {
		c.in.Advance(b)
		return b, nil
	}
	rest, answers := c.in.takeKeepalives(b, c.answerBuf[:0])
	c.answerBuf = answers[:0]
	if len(answers) == 0 {
		return rest, nil
	}
	// The connection below bounds the write and closes the connection if it fails.
	if _, err := c.Conn.Write(answers); err != nil {
		return nil, err
	}
	return rest, nil
}

func (c *keepaliveConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(b)
	c.out.Advance(b[:n])
	return n, err
}

// frameCursor follows the frames read from a connection and takes its KEEPALIVEs off the stream.
type frameCursor struct{ rsframe.Cursor }

// takeKeepalives removes from b (bytes just read, following the bytes the cursor has seen) the
// whole KEEPALIVE frames on stream 0 that it can see, appends the answer to each one with the
// respond flag (the same frame without the flag) to answers, and moves the cursor past b. It
// returns what is left of b, in place, and answers. A KEEPALIVE without the respond flag is taken
// too, unanswered: it is a sign of life and nothing else (docs/protocol.md section 3; the lease
// client asks for an answer on every other one), and rsocket-go would only decode and drop it. A
// frame it cannot see whole in b (cut by the read), and the connection's first frame (rsocket-go
// requires SETUP there and refuses anything else), stay in b.
func (c *frameCursor) takeKeepalives(b []byte, answers []byte) (rest []byte, out []byte) {
	out = answers
	kept := 0
	for i := 0; i < len(b); {
		if c.AtBoundary() && c.PastFirst() && len(b)-i >= rsframe.LengthSize {
			size := rsframe.LengthSize + rsframe.Length(b[i:])
			if len(b)-i >= size {
				if keepalive, respond := rsframe.Keepalive(b[i+rsframe.LengthSize : i+size]); keepalive {
					if respond {
						start := len(out)
						out = append(out, b[i:i+size]...)
						rsframe.SetRespond(out[start+rsframe.LengthSize:], false)
					}
					c.FrameDone()
					i += size
					continue
				}
			}
		}
		// Not a frame to take: keep bytes up to the next boundary the cursor can know of.
		j := i + 1
		if r := c.Remain(); r > 0 {
			j = i + min(r, len(b)-i)
		}
		c.Advance(b[i:j])
		kept += copy(b[kept:], b[i:j])
		i = j
	}
	return b[:kept], out
}
