// Package event is the line format of bench/leaseprobe: one JSON object per line on the probe's
// stdout, one line per thing the probe's lease client did, each stamped with the wall clock.
//
// It owns the format and its parsing, so that the probe that writes it and the benchmarks that read
// it (bench/ringbench) cannot drift apart. It must never hold anything but data: no I/O, no clock.
//
// Timestamps are Unix nanoseconds of the wall clock (CLOCK_REALTIME). Every process on one machine
// reads the same wall clock, so timestamps of different probes and of the benchmark driver compare
// directly; an NTP step during a run would shift them all alike except across the step itself.
package event
