package coordinator

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"pgregory.net/rapid"

	"github.com/retryring/retryring/internal/rsframe"
)

// keepaliveBytes is a KEEPALIVE frame as a client sends it (respond set) or as rsocket-go's server
// answers it (respond clear), length prefix included.
func keepaliveBytes(position uint64, data []byte, respond bool) []byte {
	return frameBytes(framing.NewWriteableKeepaliveFrame(position, data, respond))
}

// TestKeepaliveAnswerIsWhatRSocketGoSends: the answer written on the read goroutine is, byte for
// byte, the frame rsocket-go's server writes for the same KEEPALIVE (position and data echoed,
// respond clear), and the frames around it reach rsocket-go untouched.
func TestKeepaliveAnswerIsWhatRSocketGoSends(t *testing.T) {
	setup := validSetup("w")
	request := requestStreamFrame(1, "ring.leases", []byte(`{}`))
	ka := keepaliveBytes(7, []byte("ping"), true)
	in := bytes.Join([][]byte{setup, ka, request}, nil)

	var c frameCursor
	rest, answers := c.takeKeepalives(bytes.Clone(in), nil)
	if want := bytes.Join([][]byte{setup, request}, nil); !bytes.Equal(rest, want) {
		t.Fatalf("rsocket-go would read %x, want the SETUP and the request only (%x)", rest, want)
	}
	if want := keepaliveBytes(7, []byte("ping"), false); !bytes.Equal(answers, want) {
		t.Fatalf("answer %x, want rsocket-go's own answer %x", answers, want)
	}
	if !c.AtBoundary() {
		t.Fatal("the cursor lost the frame boundary")
	}
}

// TestTakeKeepalivesNeverTakesTheFirstFrameOrOthers: the first frame of a connection goes to
// rsocket-go whatever it is (it must be SETUP, and rsocket-go refuses anything else), and so does
// any frame but a KEEPALIVE; a KEEPALIVE without the respond flag is taken and not answered.
func TestTakeKeepalivesNeverTakesTheFirstFrameOrOthers(t *testing.T) {
	first := keepaliveBytes(0, nil, true)
	noRespond := keepaliveBytes(0, nil, false)
	requestN := frameBytes(framing.NewWriteableRequestNFrame(1, 5, 0))
	in := bytes.Join([][]byte{first, noRespond, requestN}, nil)

	var c frameCursor
	rest, answers := c.takeKeepalives(bytes.Clone(in), nil)
	if want := bytes.Join([][]byte{first, requestN}, nil); !bytes.Equal(rest, want) || len(answers) != 0 {
		t.Fatalf("answered %x and left %x, want no answer and %x left", answers, rest, want)
	}
}

// What takeKeepalives does with a frame read whole after the first one.
const (
	frameKept     = iota // left to rsocket-go
	frameAnswered        // a KEEPALIVE with the respond flag: taken and answered
	frameTaken           // a KEEPALIVE without it: taken, a sign of life only
)

// genFrame draws one whole frame (length prefix included) and what takeKeepalives does with it.
func genFrame(t *rapid.T, label string) ([]byte, int) {
	switch rapid.IntRange(0, 3).Draw(t, label+"_kind") {
	case 0:
		data := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, label+"_data")
		return keepaliveBytes(rapid.Uint64().Draw(t, label+"_pos"), data, true), frameAnswered
	case 1:
		return keepaliveBytes(rapid.Uint64().Draw(t, label+"_pos"), nil, false), frameTaken
	case 2:
		return frameBytes(framing.NewWriteableRequestNFrame(uint32(rapid.IntRange(1, 99).Draw(t, label+"_sid")), 3, 0)), frameKept
	default:
		data := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label+"_payload")
		return frameBytes(framing.NewWriteablePayloadFrame(1, data, nil, core.FlagNext)), frameKept
	}
}

// splitFrames cuts a stream of whole frames at their length prefixes: the naive model of the cursor.
func splitFrames(t *rapid.T, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < rsframe.LengthSize {
			t.Fatalf("%d bytes left, less than a length prefix", len(b))
		}
		size := rsframe.LengthSize + rsframe.Length(b)
		if size > len(b) {
			t.Fatalf("frame of %d bytes, %d left", size, len(b))
		}
		out = append(out, b[:size])
		b = b[size:]
	}
	return out
}

// TestTakeKeepalivesAgainstTheWholeStream cuts generated frame streams into reads at random and
// checks what rsocket-go gets and what is answered against the frames of the whole stream: the
// frames rsocket-go reads are the stream less some KEEPALIVEs (never the first frame), each taken
// frame with the respond flag is answered once, in order, with the flag cleared, and one without
// it is not answered; and with reads cut only between frames, every KEEPALIVE after the first
// frame is taken.
func TestTakeKeepalivesAgainstTheWholeStream(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "frames")
		var frames [][]byte
		var kinds []int
		for i := range n {
			f, kind := genFrame(t, "f"+string(rune('a'+i)))
			frames = append(frames, f)
			kinds = append(kinds, kind)
		}
		stream := bytes.Join(frames, nil)
		atFrames := rapid.Bool().Draw(t, "cut_between_frames")
		var cuts []int
		if atFrames {
			end := 0
			for _, f := range frames {
				end += len(f)
				if rapid.Bool().Draw(t, "cut") {
					cuts = append(cuts, end)
				}
			}
		} else {
			cuts = rapid.SliceOfN(rapid.IntRange(0, len(stream)), 0, 8).Draw(t, "cuts")
		}

		var c frameCursor
		var kept, answers []byte
		from := 0
		for _, to := range append(sortedInts(cuts), len(stream)) {
			if to < from {
				continue
			}
			rest, a := c.takeKeepalives(bytes.Clone(stream[from:to]), nil)
			kept = append(kept, rest...)
			answers = append(answers, a...)
			from = to
		}
		if !c.AtBoundary() {
			t.Fatal("cursor not at a boundary after whole frames")
		}

		keptFrames, answered := splitFrames(t, kept), splitFrames(t, answers)
		k, a := 0, 0
		for i, f := range frames {
			if k < len(keptFrames) && bytes.Equal(keptFrames[k], f) {
				k++
				if atFrames && i > 0 && kinds[i] != frameKept {
					t.Fatalf("frame %d, a KEEPALIVE read whole, was left to rsocket-go", i)
				}
				continue
			}
			if i == 0 || kinds[i] == frameKept {
				t.Fatalf("frame %d (%x) went missing", i, f)
			}
			if kinds[i] == frameTaken {
				continue
			}
			want := bytes.Clone(f)
			want[rsframe.LengthSize+5] &^= byte(core.FlagRespond)
			if a >= len(answered) || !bytes.Equal(answered[a], want) {
				t.Fatalf("frame %d taken but answered %x, want %x", i, answered, want)
			}
			a++
		}
		if k != len(keptFrames) || a != len(answered) {
			t.Fatalf("%d frames kept of %d, %d answers used of %d", k, len(keptFrames), a, len(answered))
		}
	})
}

func sortedInts(xs []int) []int {
	out := append([]int(nil), xs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// acceptedConn is a connection accepted by a silenceListener on loopback (what rsocket-go reads
// and writes), and its client end.
func acceptedConn(t *testing.T, silence time.Duration) (*keepaliveConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	l := newSilenceListener(ln, silence, 5*time.Second)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return server.(*keepaliveConn), client
}

// readFull reads exactly n bytes from c within a generous bound.
func readFull(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// TestKeepaliveConnAnswersUnlessAFrameIsHalfWritten: on a real connection, a KEEPALIVE is
// answered by the keepaliveConn and never reaches rsocket-go, except while rsocket-go's writer is
// in the middle of a frame: then the KEEPALIVE goes to rsocket-go as it came, and nothing is
// written into the half frame.
func TestKeepaliveConnAnswersUnlessAFrameIsHalfWritten(t *testing.T) {
	server, client := acceptedConn(t, 10*time.Second)
	setup := validSetup("w")
	request := requestStreamFrame(1, "ring.leases", []byte(`{}`))
	buf := make([]byte, 64<<10)

	// The SETUP, then a KEEPALIVE and a request: rsocket-go reads the SETUP and the request only.
	if _, err := client.Write(setup); err != nil {
		t.Fatal(err)
	}
	got := readAtLeast(t, server, buf, len(setup))
	if !bytes.Equal(got, setup) {
		t.Fatalf("rsocket-go read %x, want the SETUP", got)
	}
	if _, err := client.Write(append(keepaliveBytes(1, []byte("a"), true), request...)); err != nil {
		t.Fatal(err)
	}
	if got := readAtLeast(t, server, buf, len(request)); !bytes.Equal(got, request) {
		t.Fatalf("rsocket-go read %x, want the request alone", got)
	}
	if got, want := readFull(t, client, len(keepaliveBytes(1, []byte("a"), false))), keepaliveBytes(1, []byte("a"), false); !bytes.Equal(got, want) {
		t.Fatalf("client read %x, want the answer %x", got, want)
	}

	// rsocket-go's writer is half-way through a frame: the KEEPALIVE is left to it.
	payload := frameBytes(framing.NewWriteablePayloadFrame(1, bytes.Repeat([]byte("x"), 100), nil, core.FlagNext))
	if _, err := server.Write(payload[:50]); err != nil {
		t.Fatal(err)
	}
	ka := keepaliveBytes(2, nil, true)
	if _, err := client.Write(ka); err != nil {
		t.Fatal(err)
	}
	if got := readAtLeast(t, server, buf, len(ka)); !bytes.Equal(got, ka) {
		t.Fatalf("rsocket-go read %x, want the KEEPALIVE as sent (%x)", got, ka)
	}
	if _, err := server.Write(payload[50:]); err != nil {
		t.Fatal(err)
	}
	if got := readFull(t, client, len(payload)); !bytes.Equal(got, payload) {
		t.Fatalf("client read %x, want the payload whole %x", got, payload)
	}

	// The frame is done: the next KEEPALIVE is answered here again.
	if _, err := client.Write(append(keepaliveBytes(3, nil, true), request...)); err != nil {
		t.Fatal(err)
	}
	if got := readAtLeast(t, server, buf, len(request)); !bytes.Equal(got, request) {
		t.Fatalf("rsocket-go read %x, want the request alone", got)
	}
	if got, want := readFull(t, client, len(keepaliveBytes(3, nil, false))), keepaliveBytes(3, nil, false); !bytes.Equal(got, want) {
		t.Fatalf("client read %x, want the answer %x", got, want)
	}
}

// readAtLeast reads from the server side until n bytes came.
func readAtLeast(t *testing.T, c net.Conn, buf []byte, n int) []byte {
	t.Helper()
	var got []byte
	for len(got) < n {
		k, err := c.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
	}
	return got
}

// TestKeepalivesAloneKeepTheConnectionAndSilenceStillEndsIt: KEEPALIVEs taken on the read
// goroutine never reach rsocket-go, yet each one is a sign of life: the Read that waits through
// them ends only once the client goes silent for the silence timeout, with a timeout. Those with
// the respond flag are answered, in order; those without it (the lease client's every other one)
// are not.
func TestKeepalivesAloneKeepTheConnectionAndSilenceStillEndsIt(t *testing.T) {
	server, client := acceptedConn(t, 2*time.Second)
	setup := validSetup("w")
	if _, err := client.Write(setup); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	readAtLeast(t, server, buf, len(setup))

	const keepalives = 5
	read := make(chan error, 1)
	go func() {
		n, err := server.Read(buf)
		if n != 0 {
			err = errors.New("rsocket-go was handed bytes")
		}
		read <- err
	}()
	for i := range uint64(keepalives) {
		if _, err := client.Write(keepaliveBytes(100+i, nil, false)); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Write(keepaliveBytes(i, nil, true)); err != nil {
			t.Fatal(err)
		}
		// The answer comes back before the next one goes: each was read while the Read waited.
		// An answer to the one without the flag would come first, and differ in its position.
		want := keepaliveBytes(i, nil, false)
		if got := readFull(t, client, len(want)); !bytes.Equal(got, want) {
			t.Fatalf("client read %x, want the answer to KEEPALIVE %d alone (%x)", got, i, want)
		}
	}
	// A bound far past the silence timeout, so that a Read that no longer ends on silence fails
	// here rather than at the test binary's timeout.
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the Read ended with %v, want the silence timeout", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the Read did not end a minute after the client went silent: silence no longer ends a connection")
	}
}
