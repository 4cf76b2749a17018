//go:build skewclock

package wallclock

import (
	"fmt"
	"os"
	"time"
)

// maxSkew bounds the knob: a test skews clocks by seconds; a day or more is a typo.
const maxSkew = 24 * time.Hour

// Read once, before main runs: a clock whose skew changed midway would jump.
var skew, skewErr = parseSkew(os.LookupEnv(SkewEnv))

func parseSkew(v string, set bool) (time.Duration, error) {
	if !set || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q: %w", ErrSkew, SkewEnv, v, err)
	}
	if d <= -maxSkew || d >= maxSkew {
		return 0, fmt.Errorf("%w: %s=%q is not within ±%v", ErrSkew, SkewEnv, v, maxSkew)
	}
	return d, nil
}
