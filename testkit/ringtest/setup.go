package ringtest

import (
	"bytes"
	"encoding/json"

	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/lease"
)

// maxSetupFrame bounds the SETUP frame the classifier is willing to wait for.
const maxSetupFrame = 16 << 10

// peekSetup reads the SETUP frame at the start of an RSocket TCP connection (a 24-bit length, then
// the frame) without consuming it, and returns its data. The harness uses it to tell which worker
// opened a connection to a coordinator, so that the connection obeys that worker's fault proxy
// whichever coordinator (or redirect) it reached.
func peekSetup(peek func(n int) ([]byte, error)) (setup lease.Setup, ok bool) {
	defer func() {
		// rsocket-go's frame accessors index without checking; a malformed frame must not end the test.
		if recover() != nil {
			setup, ok = lease.Setup{}, false
		}
	}()
	head, err := peek(3)
	if err != nil {
		return lease.Setup{}, false
	}
	n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
	if n <= 0 || n > maxSetupFrame {
		return lease.Setup{}, false
	}
	b, err := peek(3 + n)
	if err != nil {
		return lease.Setup{}, false
	}
	f, err := framing.FromBytes(b[3:])
	if err != nil {
		return lease.Setup{}, false
	}
	defer f.Release()
	sf, isSetup := f.(*framing.SetupFrame)
	if !isSetup {
		return lease.Setup{}, false
	}
	if err := json.Unmarshal(bytes.Clone(sf.Data()), &setup); err != nil {
		return lease.Setup{}, false
	}
	return setup, setup.WorkerID != ""
}
