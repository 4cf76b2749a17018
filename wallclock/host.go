//go:build !skewclock

package wallclock

// The shipped binary: the host clock, whatever the environment says.
const skew = 0

var skewErr error
