package leaseclient

import (
	"sync"

	"github.com/retryring/retryring/internal/rsframe"
)

// answerAsker sets the respond flag on one KEEPALIVE in every, of those rsocket-go writes, and
// clears it on the others (docs/protocol.md section 3).
//
// rsocket-go's client sets the flag on every KEEPALIVE, and the coordinator answers each: one
// write(2) per KEEPALIVE on the leader, about a third of its CPU at 1,000 workers
// (docs/benchmarks.md, figure 10). The coordinator needs the KEEPALIVEs themselves, at the
// period, to tell a live worker from a dead one within its silence timeout; the client needs only
// to read something well within its lifetime, and an answer to every other KEEPALIVE does that
// with a period to spare (Config.Validate). The connection's first KEEPALIVE asks for an answer:
// a coordinator sends nothing after SETUP, so that answer is the first thing the client reads.
//
// It changes nothing but that flag, in place of a frame of the same size, so a Write of the
// result writes as many bytes as rsocket-go gave. A KEEPALIVE split over two Writes keeps its
// flag (the first part may already be on the wire): it is answered, which costs a frame, never a
// connection.
type answerAsker struct {
	every int

	// mu: rsclient serialises rsocket-go's writers, so this lock is never contended; it keeps the
	// cursor safe should a connection ever be written without it.
	mu         sync.Mutex
	out        rsframe.Cursor
	keepalives int // KEEPALIVEs seen whole, wrapping at every
	scratch    []byte
}

// frames returns b, or a copy of b with the respond flag cleared on the KEEPALIVEs whose turn it
// is not, and moves past b. b itself is never changed (io.Writer's rule).
func (a *answerAsker) frames(b []byte) []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	out, copied := b, false
	for i := 0; i < len(b); {
		if a.out.AtBoundary() && a.out.PastFirst() && len(b)-i >= rsframe.LengthSize {
			size := rsframe.LengthSize + rsframe.Length(b[i:])
			if len(b)-i >= size {
				if keepalive, respond := rsframe.Keepalive(b[i+rsframe.LengthSize : i+size]); keepalive && respond {
					if a.keepalives != 0 {
						if !copied {
							out, copied = append(a.scratch[:0], b...), true
							a.scratch = out
						}
						rsframe.SetRespond(out[i+rsframe.LengthSize:i+size], false)
					}
					a.keepalives = (a.keepalives + 1) % a.every
				}
				a.out.Advance(b[i : i+size])
				i += size
				continue
			}
		}
		j := i + 1
		if r := a.out.Remain(); r > 0 {
			j = i + min(r, len(b)-i)
		}
		a.out.Advance(b[i:j])
		i = j
	}
	return out
}
