package coordinator

import (
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/internal/rsframe"
	"github.com/retryring/retryring/lease"
)

// Raw RSocket frames on a plain TCP connection: what a broken, hostile or hung client sends.

func frameBytes(f core.WriteableFrame) []byte { return rsframe.Bytes(f) }

func setupFrame(data []byte, dataMIME, metadataMIME string) []byte {
	return frameBytes(framing.NewWriteableSetupFrame(core.DefaultVersion, 100*time.Millisecond, 90*time.Second, nil,
		[]byte(metadataMIME), []byte(dataMIME), data, nil, false))
}

func validSetup(workerID string) []byte {
	data, _ := json.Marshal(lease.Setup{WorkerID: workerID, Incarnation: workerID + "-raw", Region: testRing.Region, Cluster: testRing.Cluster, Service: testRing.Service})
	return setupFrame(data, lease.DataMIME, lease.MetadataMIME)
}

func requestResponseFrame(sid uint32, route string, data []byte) []byte {
	var md []byte
	if route != "" {
		md = composite(route)
	}
	return frameBytes(framing.NewWriteableRequestResponseFrame(sid, data, md, 0))
}

func requestStreamFrame(sid uint32, route string, data []byte) []byte {
	return frameBytes(framing.NewWriteableRequestStreamFrame(sid, 1, data, composite(route), 0))
}

type rawConn struct {
	t testing.TB
	net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, Conn: c}
}

func (c *rawConn) send(b ...[]byte) {
	c.t.Helper()
	for _, p := range b {
		if _, err := c.Write(p); err != nil {
			c.t.Fatalf("write: %v", err)
		}
	}
}

// next reads one frame, skipping keepalives; io.EOF (or another error) once the server closed.
func (c *rawConn) next(timeout time.Duration) (core.BufferedFrame, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	for {
		body, err := rsframe.Read(c, rsframe.MaxLength)
		if err != nil {
			return nil, err
		}
		f, err := framing.FromBytes(body)
		if err != nil {
			return nil, err
		}
		if f.Header().Type() == core.FrameTypeKeepalive {
			continue
		}
		return f, nil
	}
}

// wireErrorFrame reads the next frame and expects an ERROR frame of code carrying a WireError.
func (c *rawConn) wireErrorFrame(code core.ErrorCode) *lease.WireError {
	c.t.Helper()
	f, err := c.next(5 * time.Second)
	if err != nil {
		c.t.Fatalf("want an error frame, got %v", err)
	}
	ef, ok := f.(*framing.ErrorFrame)
	if !ok {
		c.t.Fatalf("want an error frame, got %s", f.Header().Type())
	}
	if ef.ErrorCode() != code {
		c.t.Fatalf("error code %s, want %s (%s)", ef.ErrorCode(), code, ef.ErrorData())
	}
	var we *lease.WireError
	if !errors.As(lease.FromWire(ef.ErrorData()), &we) {
		c.t.Fatalf("error data %q is not a WireError", ef.ErrorData())
	}
	return we
}

// closedWithin reports whether the server closed the connection (anything it still sends is
// drained) within d.
func (c *rawConn) closedWithin(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		_, err := c.next(time.Until(deadline))
		if err == nil {
			continue
		}
		var ne net.Error
		timedOut := errors.As(err, &ne) && ne.Timeout()
		return !timedOut
	}
	return false
}
