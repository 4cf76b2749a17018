// Package wallclock is the wall clock of a retryring process: the one reading that its window
// arithmetic (W+1, the readable rule, Node-0's time gate) and the timestamps of its Cassandra
// writes are taken from. lease.SystemClock reads it, so the worker, its lease client, the
// recorder, `retryring record` and cassandra.Store all share it.
//
// It owns one knob, for tests only: a binary built with the skewclock build tag
// (`go build -tags skewclock`) runs its clock off the host's by the Go duration in the
// environment variable RETRYRING_TEST_CLOCK_SKEW ("-900ms"), so that an end-to-end test can
// start processes whose clocks differ by up to max_clock_offset (Go's clock cannot be faked from
// outside a process). The shipped binary is built without the tag: it has no such knob, and
// ignores the variable.
//
// Now keeps Go's monotonic reading, shifted by the same skew, so durations measured between two
// readings (lease validity, timeouts) stay real in a skewed process; only the wall-clock value,
// which names windows and stamps writes, moves.
//
// What it must never do: read anything but the host clock (and, in a skewclock build, the
// environment once at start), or offer the skew through a flag.
//
//	w, err := window.WriteTarget(wallclock.Now(), 5)
package wallclock
