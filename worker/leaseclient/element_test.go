package leaseclient

import (
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/clocktest"
)

// TestOnElementNamesTheConnectionAndTheReceipt: OnElement sees every installed element with the
// address it came on (the leader's, after a follower's redirect, not the address dialled first)
// and a receipt time on the client's clock that is no earlier than the coordinator's answer, so
// that the demand's wait (Received − ValidFrom) includes the 250 ms the fake let pass.
func TestOnElementNamesTheConnectionAndTheReceipt(t *testing.T) {
	clock, sq := clocktest.New(clocktest.Start), &seq{}
	leader := startFake(t, "leader", clock, sq)
	leader.set(func(f *fakeCoord) { f.advance = 250 * time.Millisecond })
	follower := startFake(t, "follower", clock, sq)
	follower.set(func(f *fakeCoord) {
		f.follower, f.leaderID, f.leaderAddr = true, "leader", leader.addr
	})
	got := make(chan Element, 64)
	startClient(t, clock, []string{follower.addr}, func(cfg *Config) {
		cfg.OnElement = func(e Element) {
			select {
			case got <- e:
			default:
			}
		}
	})
	var els []Element
	for len(els) < 3 {
		select {
		case e := <-got:
			els = append(els, e)
		case <-time.After(15 * time.Second):
			t.Fatalf("got %d elements through OnElement, want 3", len(els))
		}
	}
	var answers []answerRecord
	leader.read(func(f *fakeCoord) { answers = append(answers, f.answers...) })
	for i, e := range els {
		if e.Coordinator != leader.addr {
			t.Errorf("element %d came on %q, want the leader's %q", i, e.Coordinator, leader.addr)
		}
		if e.Lease.WorkerID != "worker-1" || e.Lease.Epoch != 1 {
			t.Errorf("element %d: %+v", i, e.Lease)
		}
		if e.Received.Before(answers[i].sentAt) {
			t.Errorf("element %d received at %v, before the leader sent it at %v", i, e.Received, answers[i].sentAt)
		}
		if wait := e.Received.Sub(e.Lease.ValidFrom); wait < 250*time.Millisecond {
			t.Errorf("element %d: the demand waited %v, want at least the 250 ms the fake let pass", i, wait)
		}
	}
}
