package leaseclient

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"
	"pgregory.net/rapid"

	"github.com/retryring/retryring/internal/rsframe"
)

// TestAnswerAskerAsksEveryOtherKeepalive: rsocket-go sets the respond flag on every KEEPALIVE; what
// reaches the coordinator asks on the first and on every second one after it, and every other
// byte (SETUP, a request, the KEEPALIVEs' positions) goes out as rsocket-go wrote it.
func TestAnswerAskerAsksEveryOtherKeepalive(t *testing.T) {
	setup := rsframe.Bytes(framing.NewWriteableSetupFrame(core.DefaultVersion, 300*time.Millisecond, time.Second, nil, []byte("application/json"), []byte("application/json"), []byte(`{}`), nil, false))
	ka := func(pos uint64, respond bool) []byte {
		return rsframe.Bytes(framing.NewWriteableKeepaliveFrame(pos, nil, respond))
	}
	requestN := rsframe.Bytes(framing.NewWriteableRequestNFrame(1, 1, 0))
	in := bytes.Join([][]byte{setup, ka(1, true), ka(2, true), requestN, ka(3, true), ka(4, true), ka(5, true)}, nil)
	want := bytes.Join([][]byte{setup, ka(1, true), ka(2, false), requestN, ka(3, true), ka(4, false), ka(5, true)}, nil)
	a := &answerAsker{every: 2}
	sent := bytes.Clone(in)
	if got := a.frames(sent); !bytes.Equal(got, want) {
		t.Fatalf("wrote %x, want %x", got, want)
	}
	if !bytes.Equal(sent, in) {
		t.Fatal("the asker changed rsocket-go's buffer")
	}
}

// TestAnswerAskerAgainstTheWholeStream cuts generated frame streams into writes at random: what is
// written is what rsocket-go gave (same length, the same frames) except for the respond flag of
// some KEEPALIVEs; the first KEEPALIVE asks for an answer, and between two that ask there are
// never every or more that do not, so the client reads an answer at least every every periods.
func TestAnswerAskerAgainstTheWholeStream(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		every := rapid.IntRange(1, 4).Draw(t, "every")
		frames := [][]byte{rsframe.Bytes(framing.NewWriteableSetupFrame(core.DefaultVersion, time.Second, time.Second, nil, []byte("m"), []byte("d"), nil, nil, false))}
		for i := range rapid.IntRange(0, 20).Draw(t, "frames") {
			if rapid.IntRange(0, 2).Draw(t, "kind") > 0 {
				frames = append(frames, rsframe.Bytes(framing.NewWriteableKeepaliveFrame(uint64(i), nil, true)))
				continue
			}
			data := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "payload")
			frames = append(frames, rsframe.Bytes(framing.NewWriteablePayloadFrame(1, data, nil, core.FlagNext)))
		}
		stream := bytes.Join(frames, nil)
		a := &answerAsker{every: every}
		var written []byte
		for from := 0; from < len(stream); {
			to := from + rapid.IntRange(1, len(stream)-from).Draw(t, "write")
			written = append(written, a.frames(bytes.Clone(stream[from:to]))...)
			from = to
		}
		if len(written) != len(stream) {
			t.Fatalf("wrote %d bytes of %d", len(written), len(stream))
		}
		unasked, first := 0, true
		for _, f := range frames {
			got := written[:len(f)]
			written = written[len(f):]
			keepalive, _ := rsframe.Keepalive(f[rsframe.LengthSize:])
			if !keepalive {
				if !bytes.Equal(got, f) {
					t.Fatalf("frame %x written as %x", f, got)
				}
				continue
			}
			_, respond := rsframe.Keepalive(got[rsframe.LengthSize:])
			rsframe.SetRespond(got[rsframe.LengthSize:], true) // every one rsocket-go writes asks
			if !bytes.Equal(got, f) {
				t.Fatalf("KEEPALIVE %x written as %x: more than its respond flag changed", f, got)
			}
			switch {
			case first && !respond:
				t.Fatal("the connection's first KEEPALIVE does not ask for an answer")
			case respond:
				unasked = 0
			default:
				unasked++
				if unasked >= every {
					t.Fatalf("%d KEEPALIVEs in a row without the respond flag, every %d", unasked, every)
				}
			}
			first = false
		}
	})
}

// TestKeepaliveAnswerConfigErrors: the two ways to get the answer rule wrong are refused with the
// reason.
func TestKeepaliveAnswerConfigErrors(t *testing.T) {
	cfg := validConfig()
	cfg.KeepaliveAnswerEvery = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "keepalive answer every -1: want 1 or more, or 0 for the default") {
		t.Errorf("answer every -1: %v", err)
	}
	cfg = validConfig()
	cfg.KeepaliveLifetime = 800 * time.Millisecond
	want := "keepalive lifetime 800ms must be at least 3 keepalive periods (900ms): an answer comes every 2, and one may be late"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("lifetime 800 ms at the defaults: %v, want %q", err, want)
	}
}
