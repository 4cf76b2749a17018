package rsframe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/rsocket/rsocket-go/core"
)

// LengthSize is the size of the length prefix of every frame on a TCP connection.
const LengthSize = 3

// keepaliveMin is the shortest KEEPALIVE frame body: the header and the last received position.
const keepaliveMin = core.FrameHeaderLen + 8

// flagsOffset is where the 16-bit type-and-flags field starts in a frame body (after the stream id).
const flagsOffset = 4

// Length reads a length prefix.
func Length(prefix []byte) int {
	return int(prefix[0])<<16 | int(prefix[1])<<8 | int(prefix[2])
}

// MaxLength is the largest length a prefix can say: 16 MiB less one byte.
const MaxLength = 1<<24 - 1

// Read reads one length-prefixed frame from r and returns its body (the frame after its prefix).
// A frame longer than limit is an error, its body left unread: a reader that cannot trust its
// peer bounds what it allocates.
func Read(r io.Reader, limit int) ([]byte, error) {
	var prefix [LengthSize]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := Length(prefix[:])
	if n > limit {
		return nil, fmt.Errorf("rsframe: a frame of %d bytes, more than the %d this reader takes", n, limit)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// Keepalive says whether body (a whole frame after its length prefix) is a KEEPALIVE frame on
// stream 0, and whether it has the respond flag.
func Keepalive(body []byte) (keepalive, respond bool) {
	if len(body) < keepaliveMin || binary.BigEndian.Uint32(body) != 0 {
		return false, false
	}
	var h core.FrameHeader
	copy(h[:], body)
	if h.Type() != core.FrameTypeKeepalive {
		return false, false
	}
	return true, h.Flag().Check(core.FlagRespond)
}

// SetRespond sets or clears the respond flag of body, a whole KEEPALIVE frame after its length
// prefix.
func SetRespond(body []byte, respond bool) {
	flags := body[flagsOffset : flagsOffset+2]
	v := binary.BigEndian.Uint16(flags) &^ uint16(core.FlagRespond)
	if respond {
		v |= uint16(core.FlagRespond)
	}
	binary.BigEndian.PutUint16(flags, v)
}

// Cursor follows the frame boundaries of one direction of a connection's byte stream, from the
// length prefixes, whatever way the stream is cut into reads or writes. Its zero value is the
// start of a connection.
type Cursor struct {
	prefix  [LengthSize]byte
	prefixN int // bytes of the next length prefix seen so far
	remain  int // bytes of the current frame's body still to come
	frames  int // whole frames seen, saturating at 2
}

// AtBoundary says whether the bytes seen so far end exactly at the end of a frame.
func (c *Cursor) AtBoundary() bool { return c.prefixN == 0 && c.remain == 0 }

// PastFirst says whether the connection's first frame (SETUP from a client) is behind.
func (c *Cursor) PastFirst() bool { return c.frames >= 1 }

// Remain is the number of bytes of the current frame still to come, 0 at a boundary or inside a
// length prefix.
func (c *Cursor) Remain() int { return c.remain }

// Advance moves the cursor past b.
func (c *Cursor) Advance(b []byte) {
	for len(b) > 0 {
		if c.remain > 0 {
			k := min(c.remain, len(b))
			c.remain -= k
			b = b[k:]
			if c.remain == 0 {
				c.FrameDone()
			}
			continue
		}
		c.prefix[c.prefixN] = b[0]
		c.prefixN++
		b = b[1:]
		if c.prefixN == LengthSize {
			c.prefixN = 0
			c.remain = Length(c.prefix[:])
			if c.remain == 0 {
				c.FrameDone()
			}
		}
	}
}

// FrameDone counts a whole frame passed at a boundary without Advance (one taken off the stream).
func (c *Cursor) FrameDone() {
	if c.frames < 2 {
		c.frames++
	}
}

// Bytes is f as written on a TCP connection, length prefix included: the frames that tests and
// benchmarks send on a raw connection.
func Bytes(f core.WriteableFrame) []byte {
	n := f.Len()
	b := bytes.NewBuffer(make([]byte, 0, LengthSize+n))
	b.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
	if _, err := f.WriteTo(b); err != nil {
		panic(err) // a bytes.Buffer never fails a write
	}
	return b.Bytes()
}
