package coordinator

import (
	"encoding/binary"
	"net"
	"sync"

	"github.com/rsocket/rsocket-go/core"
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
// rsocket-go, which answers it as before. The connection's first frame is never taken: rsocket-go
// requires SETUP there and refuses anything else.
type keepaliveConn struct {
	net.Conn
	// in follows the frames read; only Read uses it.
	in frameCursor
	// wmu orders rsocket-go's writes and the answers Read writes; out follows the frames
	// written, so that an answer never lands inside another frame.
	wmu       sync.Mutex
	out       frameCursor
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
	if !c.out.atBoundary() {
		c.in.advance(b)
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
	c.out.advance(b[:n])
	return n, err
}

// keepaliveFrameMin is the shortest KEEPALIVE frame body: the header and the last received
// position.
const keepaliveFrameMin = core.FrameHeaderLen + 8

// frameLengthSize is the size of the length prefix of every frame on a TCP connection.
const frameLengthSize = 3

// frameCursor follows the frame boundaries of one direction of a connection's byte stream, from
// the length prefixes, whatever way the stream is cut into reads or writes.
type frameCursor struct {
	prefix  [frameLengthSize]byte
	prefixN int // bytes of the next length prefix seen so far
	remain  int // bytes of the current frame's body still to come
	frames  int // whole frames seen, saturating
}

// atBoundary says whether the bytes seen so far end exactly at the end of a frame.
func (c *frameCursor) atBoundary() bool { return c.prefixN == 0 && c.remain == 0 }

// advance moves the cursor past b.
func (c *frameCursor) advance(b []byte) {
	for len(b) > 0 {
		if c.remain > 0 {
			k := min(c.remain, len(b))
			c.remain -= k
			b = b[k:]
			if c.remain == 0 {
				c.frameDone()
			}
			continue
		}
		c.prefix[c.prefixN] = b[0]
		c.prefixN++
		b = b[1:]
		if c.prefixN == frameLengthSize {
			c.prefixN = 0
			c.remain = frameLength(c.prefix[:])
			if c.remain == 0 {
				c.frameDone()
			}
		}
	}
}

func (c *frameCursor) frameDone() {
	if c.frames < 2 {
		c.frames++
	}
}

func frameLength(prefix []byte) int {
	return int(prefix[0])<<16 | int(prefix[1])<<8 | int(prefix[2])
}

// isKeepaliveToAnswer says whether body (a whole frame after its length prefix) is a KEEPALIVE
// frame on stream 0 with the respond flag.
func isKeepaliveToAnswer(body []byte) bool {
	if len(body) < keepaliveFrameMin || binary.BigEndian.Uint32(body) != 0 {
		return false
	}
	var h core.FrameHeader
	copy(h[:], body)
	return h.Type() == core.FrameTypeKeepalive && h.Flag().Check(core.FlagRespond)
}

// takeKeepalives removes from b (bytes just read, following the bytes the cursor has seen) the
// whole KEEPALIVE frames with the respond flag that it can answer, appends each as its answer
// (the same frame without the flag) to answers, and moves the cursor past b. It returns what is
// left of b, in place, and answers. A frame it cannot see whole in b (cut by the read), and the
// connection's first frame (rsocket-go requires SETUP there and refuses anything else), stay in b.
func (c *frameCursor) takeKeepalives(b []byte, answers []byte) (rest []byte, out []byte) {
	out = answers
	kept := 0
	for i := 0; i < len(b); {
		if c.atBoundary() && c.frames >= 1 && len(b)-i >= frameLengthSize {
			size := frameLengthSize + frameLength(b[i:])
			if len(b)-i >= size && isKeepaliveToAnswer(b[i+frameLengthSize:i+size]) {
				start := len(out)
				out = append(out, b[i:i+size]...)
				flags := out[start+frameLengthSize+4 : start+frameLengthSize+6]
				binary.BigEndian.PutUint16(flags, binary.BigEndian.Uint16(flags)&^uint16(core.FlagRespond))
				c.frameDone()
				i += size
				continue
			}
		}
		// Not a frame to answer: keep bytes up to the next boundary the cursor can know of.
		j := i + 1
		if c.remain > 0 {
			j = i + min(c.remain, len(b)-i)
		}
		c.advance(b[i:j])
		kept += copy(b[kept:], b[i:j])
		i = j
	}
	return b[:kept], out
}
