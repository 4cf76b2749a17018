package leaseclient

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"

	"github.com/retryring/retryring/internal/rsframe"
	"github.com/retryring/retryring/testkit/tlstest"
)

// A dial slower than a KEEPALIVE period (here a TLS handshake the server holds back for three
// periods) still gives the coordinator SETUP as the first frame, whole: rsocket-go's KEEPALIVE
// ticker runs from before the dial, and were the dial inside Start its first tick would be written
// while Start writes SETUP (a data race -race reports, and a first frame the coordinator refuses).
func TestSlowDialSendsSetupFirst(t *testing.T) {
	ca := tlstest.NewCA("predial")
	leaf := ca.Issue(tlstest.Options{CommonName: "coordinator", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	const keepalive = 50 * time.Millisecond
	first := make(chan []byte, 1)
	addr := tlstest.Serve(t, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}, func(c *tls.Conn) {
		time.Sleep(3 * keepalive)
		if c.Handshake() != nil {
			return
		}
		frame, err := rsframe.Read(c, rsframe.MaxLength)
		if err != nil {
			return
		}
		first <- frame
		time.Sleep(3 * keepalive) // the client's KEEPALIVEs keep coming meanwhile
	})
	c, err := New(Config{WorkerID: "worker-1", Ring: testRing, Coordinators: []string{addr},
		TLS: &tls.Config{RootCAs: ca.Pool()}, Keepalive: keepalive, KeepaliveLifetime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.dialKeepalive(context.Background(), addr, keepalive)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.close()
	select {
	case frame := <-first:
		var h core.FrameHeader
		copy(h[:], frame)
		if h.Type() != core.FrameTypeSetup {
			t.Fatalf("the first frame is %v, want SETUP", h.Type())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server read no first frame")
	}
}
