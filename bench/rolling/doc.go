// Command rolling measures a rolling restart of a ring's workers under load on the real product,
// once per assignment mode (issue 19, item 5; docs/benchmarks.md, Figure 20): 3 `retryring
// coordinator` processes (Raft on loopback), -workers `retryring worker` processes of one ring
// (internal/proc), the stub downstream in this process (internal/downstream, which records every
// execution with its time and the row's window), the real Cassandra, a keyspace per mode.
//
// Per mode (-modes, contiguous and minimal, one after the other in the same run): the cluster
// starts with no worker, `retryring ctl movement RING MODE` sets the ring's mode, the workers join
// and the ring settles. Then failures are recorded steadily (-rate per second, over -instances
// instance ids, through the recorder's normal path: each into the window after the current one)
// and the phases follow while they are:
//
//   - baseline: -baseline of load with no change (the windows that become readable in it give the
//     baseline delays);
//   - restart: each worker in turn gets SIGTERM, is launched again with the same id (a new
//     incarnation), and the next one starts once the leader's view shows the new incarnation
//     active with ranges (-rounds times over the workers);
//   - join and leave (-join-leave): a new worker joins, the ring settles; it gets SIGTERM, the ring
//     settles again;
//
// Each change (the first restart, the join, the leave) begins half a second before a window
// becomes readable, so that it happens while that window's rows are pending: that is when a
// handover can delay executions and has instances to re-scan. Each phase of changes ends once the
// ring settled and every worker ended two more cycles (a worker counts its re-scans as its cycles
// visit windows, and under load a cycle lasts as long as a window's drain).
//   - tail: -tail more of load; then the load stops and the program waits until every recorded
//     failure was executed (bounded by -drain-bound).
//
// Per phase it reports what the coordinators and the workers counted: the share of the ring moved
// (retryring_coordinator_ring_tokens_moved_total, summed over the coordinators, each of which
// counts the plans it committed as leader), the new lease epochs and range changes seen in the
// leader's view (sampled every -poll, so two changes of one member between samples count once),
// the workers' instance visits and re-scans (retryring_worker_instances_scanned_total and
// instances_rescanned_total{after=start|handover}, summed over every launch of every worker: each
// worker is scraped every -poll and just before its SIGTERM), and the longest time some part of
// the ring had no usable lease by the workers' own /readyz (proc.LeaseSampler). Per execution it
// takes the delay from the start of the row's window (when the writers moved on to the next
// window; the workers may read it max_clock_offset, 2 s, later) to the call reaching the stub,
// and gives p50 / p99 / max per phase, a window belonging to the phase in which it started. At
// the end: executions done twice (0 expected) and failures recorded but never done (lost, 0).
//
// Nothing here is asserted: it prints the command, the machine and markdown tables.
//
//	go run ./bench/rolling                                   # both modes, 10 workers, 60/s
//	go run ./bench/rolling -modes minimal -rate 20 -baseline 90s
package main
