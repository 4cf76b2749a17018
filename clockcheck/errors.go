package clockcheck

import "errors"

var (
	// ErrClockUntrusted means the process's clock cannot be trusted: its measured offset from
	// Cassandra plus the measurement's uncertainty is beyond max_clock_offset / 2, or there is no
	// fresh estimate. The error that wraps it carries the figures.
	ErrClockUntrusted = errors.New("clock untrusted")
	// ErrNoSample means a measurement produced no usable sample (no host answered, or the local
	// clock went backwards across every query).
	ErrNoSample = errors.New("clockcheck: no usable clock sample")
	// ErrConfig means a Monitor's configuration is invalid.
	ErrConfig = errors.New("clockcheck: invalid configuration")
)
