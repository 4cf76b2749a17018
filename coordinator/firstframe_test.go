package coordinator

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// syncBuffer is a log destination that goroutines share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// messages are the messages logged so far.
func (b *syncBuffer) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		var v struct{ Message string }
		if json.Unmarshal([]byte(l), &v) == nil {
			out = append(out, v.Message)
		}
	}
	return out
}

// TestAConnectionClosedBeforeItsFirstFrameIsOneLineWithItsAddress: a client that connects to the
// RSocket port and hangs up, or says nothing, is logged once, with its address and why; a client
// whose SETUP was refused is logged by the refusal alone.
func TestAConnectionClosedBeforeItsFirstFrameIsOneLineWithItsAddress(t *testing.T) {
	logs := &syncBuffer{}
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Logger = zerolog.New(logs).Level(zerolog.InfoLevel) })
	n := c.leader()

	waitClosed := func(conn net.Conn) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil {
			t.Fatalf("the coordinator did not close the connection: %v", err)
		}
	}
	lineFor := func(conn net.Conn) string {
		t.Helper()
		prefix := "rsocket: connection from " + conn.LocalAddr().String() + " "
		var found string
		eventually(t, 5*time.Second, "the line about "+conn.LocalAddr().String(), func() bool {
			for _, m := range logs.messages() {
				if strings.HasPrefix(m, prefix) {
					found = m
					return true
				}
			}
			return false
		})
		return found
	}

	hungUp := dialRaw(t, n.RSocketAddr())
	_ = hungUp.Close()
	if got, want := lineFor(hungUp), "rsocket: connection from "+hungUp.LocalAddr().String()+" closed before its first frame: EOF (the client hung up)"; got != want {
		t.Errorf("a client that hung up:\n got %s\nwant %s", got, want)
	}

	silent := dialRaw(t, n.RSocketAddr())
	waitClosed(silent)
	if got, want := lineFor(silent), "rsocket: connection from "+silent.LocalAddr().String()+" closed before its first frame: nothing received for "+n.cfg.SilenceTimeout.String()+" (the silence timeout)"; got != want {
		t.Errorf("a silent client:\n got %s\nwant %s", got, want)
	}

	refused := rawSetup(t, n.RSocketAddr(), "", testRing, "")
	expectRejected(t, refused, lease.CodeBadSetup)
	waitClosed(refused)
	for _, m := range logs.messages() {
		if strings.Contains(m, refused.LocalAddr().String()) || strings.Contains(m, "read first frame failed") {
			t.Errorf("logged %q", m)
		}
	}

	// On a TLS port, a client that hangs up during the handshake has the handshake's line alone.
	tlsLogs := &syncBuffer{}
	tlsNode := newTLSCluster(t, 1, newPKI(t), func(_ int, cfg *Config) { cfg.Logger = zerolog.New(tlsLogs).Level(zerolog.InfoLevel) }).leader()
	hungUpTLS := dialRaw(t, tlsNode.RSocketAddr())
	_ = hungUpTLS.Close()
	eventually(t, 5*time.Second, "the handshake's line", func() bool {
		return slices.Contains(tlsLogs.messages(), "RSocket TLS: a worker connection was refused")
	})
	for _, m := range tlsLogs.messages() {
		if strings.HasPrefix(m, "rsocket: connection from") {
			t.Errorf("a failed TLS handshake logged twice: %q", m)
		}
	}
}
