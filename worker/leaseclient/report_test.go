package leaseclient

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/clocktest"
)

// TestControlsAndRenewalReachTheGuard: the renewal period and the flow controls of an element are
// part of the lease the guard holds, and a renewal that changes the controls replaces them.
func TestControlsAndRenewalReachTheGuard(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	f := startFake(t, "c1", clock, sq)
	rate := 2.5
	f.set(func(f *fakeCoord) {
		f.assign.RenewalMs = 1000
		f.assign.Controls = &lease.Controls{PausedImpl: []string{"Ship"}, RatePerS: &rate}
	})
	h := startClient(t, clock, []string{f.addr}, nil)
	l := waitLease(t, h.c, "a lease", anyLease)
	if l.Renewal != time.Second || l.LeastValidity() != time.Second {
		t.Errorf("lease renewal %v, least validity %v; want 1s and 1s (ttl 3s)", l.Renewal, l.LeastValidity())
	}
	if c := l.Controls; c == nil || c.Paused || !reflect.DeepEqual(c.PausedImpl, []string{"Ship"}) || c.RatePerS == nil || *c.RatePerS != rate {
		t.Fatalf("lease controls %+v", l.Controls)
	}
	if !l.Controls.ImplPaused("Ship") || l.Controls.ImplPaused("Payment") {
		t.Error("impl pause of Ship not read from the lease")
	}
	f.set(func(f *fakeCoord) { f.assign.Controls = &lease.Controls{Paused: true} })
	waitLease(t, h.c, "a renewal that pauses the ring", func(l lease.Lease) bool { return l.Controls != nil && l.Controls.Paused })
}

// TestReportsGoBesideTheStream: ring.report carries what the Report hook says under the worker's
// id, right after the first lease and after each new epoch, and not on renewals.
func TestReportsGoBesideTheStream(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	f := startFake(t, "c1", clock, sq)
	h := startClient(t, clock, []string{f.addr}, func(cfg *Config) {
		cfg.ReportPeriod = time.Hour // only the reports that follow a new lease
		cfg.Report = func() lease.Report {
			return lease.Report{
				WorkerID:    "ignored: the client names itself",
				Executions:  map[string]uint64{"done": 7, "transient": 2},
				PendingRows: 3, OldestWindowStartMs: 1_700_000_040_000,
				Breakers: []lease.BreakerReport{{Impl: "Payment", State: "open", OpenUntilMs: 1_700_000_050_000}},
			}
		}
	})
	reports := func() (n, calls int) {
		f.read(func(f *fakeCoord) { n, calls = len(f.reports), f.reportCalls })
		return n, calls
	}
	eventually(t, "a report after the first lease", func() bool { n, _ := reports(); return n >= 1 })
	f.read(func(f *fakeCoord) {
		r := f.reports[0]
		if r.WorkerID != "worker-1" || r.Executions["done"] != 7 || r.PendingRows != 3 || len(r.Breakers) != 1 || r.Breakers[0].Impl != "Payment" {
			t.Errorf("report %+v", r)
		}
	})
	f.set(func(f *fakeCoord) { f.assign.Epoch = 2 })
	eventually(t, "a report after the new epoch", func() bool { n, _ := reports(); return n >= 2 })
	waitElements(t, h.c, h.c.Stats().Elements+3)
	if n, _ := reports(); n != 2 {
		t.Errorf("%d reports with an hour's period after two leases, want 2", n)
	}
	if st := h.c.Stats(); st.Reports != 2 {
		t.Errorf("stats %+v, want 2 reports", st)
	}
}

// TestFailedReportsLeaveTheStreamAlone: reports go every ReportPeriod; reports that fail
// (unavailable) disturb neither the lease stream nor the connection; a coordinator that does not
// know the route (an older version) gets no more reports on that connection, said once in the
// log, and a new connection reports again.
func TestFailedReportsLeaveTheStreamAlone(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	f := startFake(t, "c1", clock, sq)
	f.set(func(f *fakeCoord) { f.reportErr = lease.CodeUnavailable })
	logs := &syncBuffer{}
	h := startClient(t, clock, []string{f.addr}, func(cfg *Config) {
		cfg.Logger = zerolog.New(logs).Level(zerolog.DebugLevel)
		cfg.ReportPeriod = 5 * time.Millisecond
		cfg.Report = func() lease.Report { return lease.Report{} }
	})
	calls := func() (n int) {
		f.read(func(f *fakeCoord) { n = f.reportCalls })
		return n
	}
	eventually(t, "three failed reports", func() bool { return calls() >= 3 })
	waitElements(t, h.c, h.c.Stats().Elements+5)
	f.read(func(f *fakeCoord) {
		if len(f.setups) != 1 || f.streams != 1 {
			t.Errorf("%d SETUPs and %d streams after failed reports, want one of each", len(f.setups), f.streams)
		}
	})
	if !strings.Contains(logs.String(), "report not delivered") {
		t.Errorf("failed reports not logged at debug; logs:\n%s", logs)
	}

	f.set(func(f *fakeCoord) { f.reportErr = lease.CodeUnknownRoute })
	eventually(t, "the log line of an older coordinator", func() bool {
		return strings.Contains(logs.String(), "does not know ring.report")
	})
	stopped := calls()
	waitElements(t, h.c, h.c.Stats().Elements+10)
	if n := calls(); n != stopped {
		t.Errorf("%d reports after unknown_route on the same connection, want none", n-stopped)
	}

	// A new connection (perhaps to an upgraded coordinator) reports again.
	f.set(func(f *fakeCoord) { f.reportErr = "" })
	f.cut(t)
	eventually(t, "a report on the new connection", func() bool {
		n := 0
		f.read(func(f *fakeCoord) { n = len(f.reports) })
		return n >= 1
	})
	// End with no report in flight: rsocket-go races a request-response's answer against the
	// close of its connection, and -race would report it.
	waitElements(t, h.c, h.c.Stats().Elements+2)
	f.set(func(f *fakeCoord) { f.reportErr = lease.CodeUnknownRoute })
	eventually(t, "reports stopped on the new connection", func() bool {
		s := h.c.session()
		return s != nil && h.c.rep.stoppedOn(s)
	})
	if n := strings.Count(logs.String(), "does not know ring.report"); n != 1 {
		t.Errorf("the older coordinator was logged %d times, want once", n)
	}
}
