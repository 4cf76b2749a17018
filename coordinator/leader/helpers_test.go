package leader

import (
	"time"

	"github.com/retryring/retryring/lease"
)

// The timing and ring the tests and transcripts run with: the coordinator tests' testTiming
// (TTL 1.5s, renewal 300ms, margin 100ms) and testRing.
var (
	testTiming = lease.Timing{TTL: 1500 * time.Millisecond, Renewal: 300 * time.Millisecond, Margin: 100 * time.Millisecond}
	testRing   = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
)

// The coordinator's defaults (coordinator.DefaultLeaderLeaseTimeout, DefaultSilenceTimeout,
// DefaultReconnectGrace), which the transcripts' times are computed with. This package's tests
// cannot import the coordinator (it imports this package), so they are written out here.
const (
	defaultLeaderLease    = 250 * time.Millisecond
	defaultSilenceTimeout = 750 * time.Millisecond
	defaultReconnectGrace = 2 * time.Second
)
