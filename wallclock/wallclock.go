package wallclock

import "time"

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
