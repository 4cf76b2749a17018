package flood

import (
	"testing"
	"time"
)

// TestCoverKeepsTheLongestLapseAfterTheFirstLease: a worker not yet holding is not in a lapse;
// afterwards each stretch without a lease is measured from sample to sample.
func TestCoverKeepsTheLongestLapseAfterTheFirstLease(t *testing.T) {
	held := []bool{false, true, false, false, true, false, true}
	i := 0
	c := &Cover{holds: []func() bool{func() bool { return held[i] }}, since: make([]time.Time, 1),
		seen: make([]bool, 1), length: make([]time.Duration, 1), lapses: make([]int, 1)}
	t0 := time.Unix(0, 0)
	for i = range held {
		c.sample(t0.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	if c.length[0] != 200*time.Millisecond || c.lapses[0] != 2 {
		t.Fatalf("longest %v over %d lapses, want 200ms over 2", c.length[0], c.lapses[0])
	}
}
