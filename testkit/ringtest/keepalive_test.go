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
// periods fit in the silence timeout) with room to spare. Raising the period or the timeout past
// either breaks this test, not just a figure in docs/benchmarks.md.
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
	// The client gives a coordinator up after reading nothing for its lifetime: a live coordinator
	// answers every KEEPALIVE, so one lost answer must not make the client leave it.
	if leaseclient.DefaultKeepaliveLifetime <= 2*leaseclient.MaxKeepalive {
		t.Errorf("keepalive lifetime %v: one lost answer at a %v period drops the connection", leaseclient.DefaultKeepaliveLifetime, leaseclient.MaxKeepalive)
	}
}
