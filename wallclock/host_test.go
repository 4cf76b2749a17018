//go:build !skewclock

package wallclock_test

import (
	"testing"
	"time"

	"github.com/retryring/retryring/wallclock"
)

// The shipped build has no skew, whatever the environment said when the process started (the
// e2e test TestShippedBinaryIgnoresClockSkew proves it of the binary).
func TestHostClockHasNoSkew(t *testing.T) {
	if d, err := wallclock.Skew(); d != 0 || err != nil {
		t.Fatalf("Skew() = %v, %v; want 0, nil without the skewclock tag", d, err)
	}
	before := time.Now()
	now := wallclock.Now()
	after := time.Now()
	if now.Before(before) || now.After(after) {
		t.Fatalf("Now() = %v, not between two host readings %v and %v", now, before, after)
	}
}
