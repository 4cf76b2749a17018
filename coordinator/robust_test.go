package coordinator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rsocket/rsocket-go/core"
	"github.com/rsocket/rsocket-go/core/framing"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// TestSilentConnectionIsClosedAndItsWorkerDown: a worker that joined, got its lease and then went
// silent (hung, stopped, cut off: no keepalive, no FIN) is disconnected after about SilenceTimeout,
// not after rsocket-go's 90 s, and committed down.
func TestSilentConnectionIsClosedAndItsWorkerDown(t *testing.T) {
	c := newCluster(t, 1, nil)
	leader := c.leader()

	conn := dialRaw(t, leader.RSocketAddr())
	conn.send(validSetup("hung"), requestStreamFrame(1, lease.RouteLeases, []byte(`{}`)))
	f, err := conn.next(5 * time.Second)
	if err != nil {
		t.Fatalf("want a lease element: %v", err)
	}
	var el lease.WireLease
	if pf, ok := f.(*framing.PayloadFrame); !ok || json.Unmarshal(pf.Data(), &el) != nil || el.WorkerID != "hung" {
		t.Fatalf("want a lease element, got %s", f.Header().Type())
	}
	// From here on the client sends nothing: not even REQUEST_N or KEEPALIVE.
	silentFrom := time.Now()
	if !conn.closedWithin(20 * leader.cfg.SilenceTimeout) {
		t.Fatal("the coordinator kept a silent connection open")
	}
	t.Logf("silent connection closed %v after the last frame from the client (silence timeout %v)",
		time.Since(silentFrom).Round(time.Millisecond), leader.cfg.SilenceTimeout)
	eventually(t, 5*time.Second, "the hung worker committed down", func() bool {
		v := leader.View()
		return len(v.Rings) == 1 && len(v.Rings[0].Members) == 1 && v.Rings[0].Members[0].State == admin.MemberDeparted
	})

	// A connection that never even sends SETUP is closed too.
	idle := dialRaw(t, leader.RSocketAddr())
	if !idle.closedWithin(20 * leader.cfg.SilenceTimeout) {
		t.Fatal("the coordinator kept a connection without SETUP open")
	}
}

// TestBadInputGetsClearErrorsAndNoCrash sends what broken or hostile clients send and checks the
// answer of each, then that the coordinator still serves a worker.
func TestBadInputGetsClearErrorsAndNoCrash(t *testing.T) {
	c := newCluster(t, 1, nil)
	leader := c.leader()
	addr := leader.RSocketAddr()

	t.Run("garbage bytes", func(t *testing.T) {
		conn := dialRaw(t, addr)
		conn.send([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if !conn.closedWithin(5 * time.Second) {
			t.Fatal("garbage did not close the connection")
		}
	})
	t.Run("truncated SETUP", func(t *testing.T) {
		conn := dialRaw(t, addr)
		full := validSetup("trunc")
		conn.send(full[:len(full)/2])
		_ = conn.Conn.(interface{ CloseWrite() error }).CloseWrite()
		if !conn.closedWithin(5 * time.Second) {
			t.Fatal("a truncated SETUP did not close the connection")
		}
	})
	t.Run("SETUP with MIME lengths past the frame", func(t *testing.T) {
		conn := dialRaw(t, addr)
		// header (6) + version, keepalive, lifetime (12) + a metadata MIME length of 200 and nothing.
		body := []byte{0, 0, 0, 0, byte(core.FrameTypeSetup) << 2, 0, 0, 1, 0, 0, 0, 0, 0x75, 0x30, 0, 1, 0x5f, 0x90, 200}
		conn.send(append([]byte{0, 0, byte(len(body))}, body...))
		we := conn.wireErrorFrame(core.ErrorCodeRejectedSetup)
		if we.Code != lease.CodeBadSetup {
			t.Fatalf("got %+v", we)
		}
	})
	t.Run("wrong data MIME", func(t *testing.T) {
		conn := dialRaw(t, addr)
		conn.send(setupFrame([]byte(`{}`), "application/binary", lease.MetadataMIME))
		if we := conn.wireErrorFrame(core.ErrorCodeRejectedSetup); we.Code != lease.CodeBadSetup {
			t.Fatalf("got %+v", we)
		}
	})
	t.Run("SETUP data not JSON", func(t *testing.T) {
		conn := dialRaw(t, addr)
		conn.send(setupFrame([]byte(`{"worker_id":`), lease.DataMIME, lease.MetadataMIME))
		if we := conn.wireErrorFrame(core.ErrorCodeRejectedSetup); we.Code != lease.CodeBadSetup {
			t.Fatalf("got %+v", we)
		}
	})
	t.Run("SETUP without incarnation", func(t *testing.T) {
		conn := dialRaw(t, addr)
		conn.send(setupFrame([]byte(`{"worker_id":"w","region":"r","cluster":"c","service":"s"}`), lease.DataMIME, lease.MetadataMIME))
		if we := conn.wireErrorFrame(core.ErrorCodeRejectedSetup); we.Code != lease.CodeBadSetup {
			t.Fatalf("got %+v", we)
		}
	})
	t.Run("SETUP with an oversized ring name", func(t *testing.T) {
		// Every ring a SETUP names reaches the Raft log: a megabyte of service name is refused
		// before anything is committed.
		conn := dialRaw(t, addr)
		big := strings.Repeat("s", 1<<20)
		conn.send(setupFrame([]byte(`{"worker_id":"w","incarnation":"i","region":"r","cluster":"c","service":"`+big+`"}`), lease.DataMIME, lease.MetadataMIME))
		if we := conn.wireErrorFrame(core.ErrorCodeRejectedSetup); we.Code != lease.CodeBadSetup {
			t.Fatalf("got %+v", we)
		}
	})
	t.Run("requests", func(t *testing.T) {
		conn := dialRaw(t, addr)
		conn.send(validSetup("rr"))
		cases := []struct {
			name  string
			frame []byte
			code  string
		}{
			{"unknown route", requestResponseFrame(1, "ring.nope", []byte(`{}`)), lease.CodeUnknownRoute},
			{"no metadata", requestResponseFrame(3, "", []byte(`{}`)), lease.CodeUnknownRoute},
			{"bad JSON", requestResponseFrame(5, lease.RouteRelease, []byte(`{"epoch":`)), lease.CodeBadRequest},
			{"another worker's id", requestResponseFrame(7, lease.RouteRelease, []byte(`{"worker_id":"other","epoch":1}`)), lease.CodeBadRequest},
			{"stream route as request-response", requestResponseFrame(9, lease.RouteLeases, []byte(`{}`)), lease.CodeBadRequest},
			{"truncated composite metadata", frameBytes(framing.NewWriteableRequestResponseFrame(11, []byte(`{}`), []byte{0xfe, 0, 0, 9, 1}, 0)), lease.CodeBadRequest},
			{"unknown stream route", requestStreamFrame(13, "ring.nope", []byte(`{}`)), lease.CodeUnknownRoute},
			{"stream with bad JSON", requestStreamFrame(15, lease.RouteLeases, []byte(`[`)), lease.CodeBadRequest},
			{"release of an unknown member", requestResponseFrame(17, lease.RouteRelease, []byte(`{"worker_id":"rr","epoch":1}`)), lease.CodeUnknownWorker},
		}
		for _, tc := range cases {
			conn.send(tc.frame)
			if we := conn.wireErrorFrame(core.ErrorCodeApplicationError); we.Code != tc.code {
				t.Errorf("%s: got %+v, want %s", tc.name, we, tc.code)
			}
		}
	})

	w := newTestWorker(t, "ok", addr).start()
	eventually(t, 10*time.Second, "a worker still gets the ring", func() bool {
		return w.holds(lease.Ranges{lease.FullRing}, 0, 1)
	})
	if getJSON(t, leader.HTTPAddr(), admin.PathHealthz, nil) != http.StatusOK {
		t.Fatal("unhealthy after bad input")
	}
}
