package ringtest

import (
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator"
	"github.com/retryring/retryring/worker/leaseclient"
)

// TestKeepaliveRuleKeepsBothPromises: the defaults of the two sides keep what protocol.md section 3
// promises. A dead worker is detected within a second (the silence timeout is under one), and a
// live worker at the longest KEEPALIVE period the protocol allows survives a lost KEEPALIVE (two
// periods fit in the silence timeout) with room to spare; the worker detects a dead leader within
// a second too, and a live one that answers every other KEEPALIVE is not left for one late
// answer. Raising the period, the timeout, the lifetime or the answers' spacing past any of these
// breaks this test, not just a figure in docs/benchmarks.md.
func TestKeepaliveRuleKeepsBothPromises(t *testing.T) {
	silence := coordinator.DefaultSilenceTimeout
	if silence >= time.Second {
		t.Errorf("silence timeout %v: a dead worker is no longer detected under a second", silence)
	}
	const slackAfterOneLost = 100 * time.Millisecond
	if late := silence - 2*leaseclient.MaxKeepalive; late < slackAfterOneLost {
		t.Errorf("KEEPALIVE period %v under a silence timeout of %v: after one lost KEEPALIVE the next may be only %v late, want at least %v",
			leaseclient.MaxKeepalive, silence, late, slackAfterOneLost)
	}
	if leaseclient.DefaultKeepalive > leaseclient.MaxKeepalive {
		t.Errorf("the lease client's default KEEPALIVE period %v is over the protocol's %v", leaseclient.DefaultKeepalive, leaseclient.MaxKeepalive)
	}
	// The client gives a coordinator up after reading nothing for its lifetime, which is how it
	// detects a dead leader: under a second. A live coordinator answers the KEEPALIVEs that ask
	// for it, one in DefaultKeepaliveAnswerEvery, so an answer may come a whole period late (at
	// 300 ms, a TCP retransmission at Linux's minimum timeout of 200 ms fits) without making the
	// client leave it.
	lifetime := leaseclient.DefaultKeepaliveLifetime
	if lifetime > time.Second {
		t.Errorf("keepalive lifetime %v: a dead leader is no longer detected by the worker within a second", lifetime)
	}
	answers := time.Duration(leaseclient.DefaultKeepaliveAnswerEvery) * leaseclient.MaxKeepalive
	if late := lifetime - answers; late < leaseclient.MaxKeepalive {
		t.Errorf("an answer every %v under a lifetime of %v: one may be only %v late, want at least a period (%v)",
			answers, lifetime, late, leaseclient.MaxKeepalive)
	}
}
