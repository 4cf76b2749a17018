package wallclock

import (
	"context"
	"time"
)

// SkewEnv names the environment variable a skewclock build reads its skew from (a Go duration,
// "-900ms"). Only such a build reads it; the shipped binary ignores it.
const SkewEnv = "RETRYRING_TEST_CLOCK_SKEW"

// Now is the process's wall-clock time, with Go's monotonic reading: the host clock, plus the
// skew of a skewclock build.
func Now() time.Time { return time.Now().Add(skew) }

// Skew is how far Now runs from the host clock: always zero without the skewclock build tag.
// err says why a skewclock build could not use SkewEnv (Now then runs on the host clock); a
// process checks it before doing anything else.
func Skew() (d time.Duration, err error) { return skew, skewErr }

// Sleep waits d on the host's timer, or until ctx ends; it reports whether d passed. (A timer
// counts real time whatever the skew of a test build: only Now's wall value is shifted.)
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
