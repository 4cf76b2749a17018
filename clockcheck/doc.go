// Package clockcheck measures a process's clock offset from Cassandra's clock and says whether the
// process may trust its clock (docs/schema.md, "The clock bound").
//
// max_clock_offset bounds the offset between any two processes' clocks. Cassandra is the one clock
// every process can reach, so each process checks itself against half of it: the measured |offset|
// plus the measurement's uncertainty (half the round trip) must stay within max_clock_offset / 2.
// Two processes that pass are within max_clock_offset of each other as long as Cassandra's hosts
// agree on the time. A process measures every Cassandra host it reached and is judged by the
// median host by offset, so that one host with a bad clock neither untrusts every process nor
// decides alone; the estimate's Spread says how far apart the hosts' clocks may be, and the Monitor
// logs (once per change) when that is more than max_clock_offset / 2.
//
// What it owns:
//   - the estimate from samples (estimate.go): a pure function of the clock readings taken around
//     each query and the server's answer; tested with generated samples;
//   - the verdict (Check): trusted, or why not (beyond the bound, no estimate, a stale estimate, a
//     wall clock stepped since the measurement: its elapsed time since then differs from the
//     monotonic clock's by more than the bound leaves, which Status sees at once and has Run
//     measure again);
//   - the Monitor (monitor.go): measures at start and every period through a Prober, keeps the last
//     estimate, logs each change of verdict once, and tells a listener;
//   - the Cassandra prober (cassandra.go): SELECT toUnixTimestamp(now()) FROM system.local, spread
//     over the connected hosts, the local clock read before and after each query.
//
// What it must never do: correct the process's clock, or read the wall clock directly (every
// reading goes through the injected lease.Clock, so tests skew it).
//
// Usage:
//
//	m, err := clockcheck.NewMonitor(clockcheck.Config{
//		Prober: clockcheck.NewCassandraProber(session, clock), Clock: clock, MaxClockOffset: 2 * time.Second,
//		OnChange: func(s clockcheck.Status) { ... }, // leave the ring when !s.Trusted, rejoin when trusted
//	})
//	if err := m.Measure(ctx); err != nil { ... } // at start: measure, and only then work
//	go m.Run(ctx)                                 // every Config.Every after that
//	if err := m.Status().Err(); err != nil { ... } // ErrClockUntrusted, with the figures
package clockcheck
