package rsframe

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"pgregory.net/rapid"
)

// TestKeepaliveAndSetRespondAgreeWithRSocketGo: the KEEPALIVE frames rsocket-go writes, with and
// without the respond flag, are recognised as such, SetRespond turns one into the other byte for
// byte, and no other frame (a KEEPALIVE-sized REQUEST_N, a frame on another stream) passes.
func TestKeepaliveAndSetRespondAgreeWithRSocketGo(t *testing.T) {
	asks := Bytes(framing.NewWriteableKeepaliveFrame(42, []byte("data"), true))
	not := Bytes(framing.NewWriteableKeepaliveFrame(42, []byte("data"), false))
	if k, r := Keepalive(asks[LengthSize:]); !k || !r {
		t.Fatalf("KEEPALIVE with the flag read as keepalive %v respond %v", k, r)
	}
	if k, r := Keepalive(not[LengthSize:]); !k || r {
		t.Fatalf("KEEPALIVE without the flag read as keepalive %v respond %v", k, r)
	}
	cleared := bytes.Clone(asks)
	SetRespond(cleared[LengthSize:], false)
	if !bytes.Equal(cleared, not) {
		t.Fatalf("cleared %x, want rsocket-go's %x", cleared, not)
	}
	SetRespond(cleared[LengthSize:], true)
	if !bytes.Equal(cleared, asks) {
		t.Fatalf("set %x, want rsocket-go's %x", cleared, asks)
	}
	for _, f := range [][]byte{
		Bytes(framing.NewWriteableRequestNFrame(0, 1, 0)),
		Bytes(framing.NewWriteableRequestNFrame(7, 1, 0)),
		Bytes(framing.NewWriteablePayloadFrame(1, bytes.Repeat([]byte("k"), 20), nil, core.FlagNext)),
	} {
		if k, _ := Keepalive(f[LengthSize:]); k {
			t.Errorf("%x read as a KEEPALIVE", f)
		}
	}
}

// TestCursorFollowsAnyCut: whatever way reads or writes cut a stream of frames, the cursor is at a
// boundary exactly where a frame ends, and past the first frame once it ended.
func TestCursorFollowsAnyCut(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var stream []byte
		ends := map[int]bool{0: true}
		for range rapid.IntRange(1, 8).Draw(t, "frames") {
			var f []byte
			if rapid.Bool().Draw(t, "keepalive") {
				f = Bytes(framing.NewWriteableKeepaliveFrame(rapid.Uint64().Draw(t, "pos"), nil, rapid.Bool().Draw(t, "respond")))
			} else {
				f = Bytes(framing.NewWriteablePayloadFrame(1, rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "data"), nil, core.FlagNext))
			}
			stream = append(stream, f...)
			ends[len(stream)] = true
		}
		firstEnd := LengthSize + Length(stream)
		var c Cursor
		for from := 0; from < len(stream); {
			to := from + rapid.IntRange(1, len(stream)-from).Draw(t, "cut")
			c.Advance(stream[from:to])
			if c.AtBoundary() != ends[to] {
				t.Fatalf("after %d of %d bytes: at boundary %v, want %v", to, len(stream), c.AtBoundary(), ends[to])
			}
			if c.PastFirst() != (to >= firstEnd) {
				t.Fatalf("after %d bytes: past the first frame (%d bytes) %v", to, firstEnd, c.PastFirst())
			}
			from = to
		}
	})
}

func TestReadTakesOneFrameAndRefusesOneTooLong(t *testing.T) {
	keepalive := Bytes(framing.NewWriteableKeepaliveFrame(7, []byte("x"), true))
	var stream bytes.Buffer
	stream.Write(keepalive)
	stream.Write(keepalive)
	size := len(keepalive)
	for i := range 2 {
		body, err := Read(&stream, MaxLength)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if len(body) != size-LengthSize {
			t.Fatalf("frame %d: %d bytes, want %d", i, len(body), size-LengthSize)
		}
		if ka, respond := Keepalive(body); !ka || !respond {
			t.Fatalf("frame %d: keepalive %v respond %v, want both", i, ka, respond)
		}
	}
	if _, err := Read(&stream, MaxLength); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}

	stream.Reset()
	stream.Write(keepalive)
	if _, err := Read(&stream, size-LengthSize-1); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a frame over the limit: %v, want an error that says so", err)
	}
	if _, err := Read(bytes.NewReader([]byte{0, 0, 20, 1, 2}), MaxLength); err != io.ErrUnexpectedEOF {
		t.Fatalf("a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}
