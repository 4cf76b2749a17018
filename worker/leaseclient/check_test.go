package leaseclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// checkClient is a client that is never Run, for CheckCredentials.
func checkClient(t *testing.T, addrs ...string) *Client {
	t.Helper()
	c, err := New(Config{WorkerID: "worker-1", Ring: testRing, Coordinators: addrs, Token: "tok-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestCheckCredentialsAdmittedWithoutJoining: an admitted SETUP is the whole answer: the check
// sends its SETUP (with the token) and one ring.view, opens no lease stream and sends no demand,
// whether the coordinator is the leader or a follower answering not_leader; a closed address
// before it is skipped.
func TestCheckCredentialsAdmittedWithoutJoining(t *testing.T) {
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	f := startFake(t, "c1", clock, &seq{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := checkClient(t, closedAddr(t), f.addr).CheckCredentials(ctx); err != nil {
		t.Fatalf("admitted: %v", err)
	}
	f.set(func(f *fakeCoord) { f.follower = true })
	if err := checkClient(t, f.addr).CheckCredentials(ctx); err != nil {
		t.Fatalf("admitted by a follower: %v", err)
	}
	f.read(func(f *fakeCoord) {
		if len(f.setups) != 2 || f.setups[0].setup.Token != "tok-1" || f.setups[0].setup.WorkerID != "worker-1" {
			t.Errorf("setups %+v, want two of worker-1 with its token", f.setups)
		}
		if strings.Join(f.routes, ",") != lease.RouteView+","+lease.RouteView || f.streams != 0 || len(f.demands) != 0 {
			t.Errorf("routes %v, %d streams, %d demands; want one ring.view per check and no lease stream", f.routes, f.streams, len(f.demands))
		}
	})
}

// TestCheckCredentialsRefused: a REJECTED_SETUP is ErrRefused with the coordinator's reason and
// address, and stops the check at that coordinator; no answer at all is not.
func TestCheckCredentialsRefused(t *testing.T) {
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	refusing := startFake(t, "c1", clock, &seq{})
	refusing.set(func(f *fakeCoord) { f.rejectSetup = true })
	admitting := startFake(t, "c2", clock, &seq{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	err := checkClient(t, refusing.addr, admitting.addr).CheckCredentials(ctx)
	if !errors.Is(err, ErrRefused) || !errors.Is(err, lease.ErrBadSetup) ||
		!strings.HasPrefix(err.Error(), "the coordinator at "+refusing.addr+" refused this worker's credentials: ") ||
		!strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("refused SETUP: %v; want ErrRefused naming %s and the reason", err, refusing.addr)
	}
	admitting.read(func(f *fakeCoord) {
		if len(f.setups) != 0 {
			t.Errorf("the check went on to another coordinator after a refusal")
		}
	})

	closed := closedAddr(t)
	err = checkClient(t, closed).CheckCredentials(ctx)
	if err == nil || errors.Is(err, ErrRefused) || !errors.Is(err, ErrDisconnected) || !strings.Contains(err.Error(), closed) {
		t.Fatalf("nobody listening: %v; want ErrDisconnected naming %s, not ErrRefused", err, closed)
	}
}
