// Command leaseprobe is a lease-only retry worker: one worker/leaseclient that joins a ring and
// does nothing with its lease but report it. Benchmarks (bench/ringbench) run several of them as
// separate processes, fault them with signals, and measure from what they report.
//
// It prints one JSON line per event on stdout (format: bench/leaseprobe/event), stamped with the
// wall clock so that the lines of several probes and of the driver compare directly:
//   - start (with the incarnation), once per process;
//   - connected, each time the lease client opens a connection (with the coordinator address);
//   - lease, after each element is installed in the guard: epoch, generation, ranges, and the
//     validity the guard enforces (valid_from_ns = the demand's send time, expires_at_ns);
//   - leave_start on SIGTERM or SIGINT, then leave_done once Leave returned, then exit.
//
// The lease client's own log goes to stderr at -log-level (warn by default). The coordinator
// address of a connection is read from the client's "connected" debug line, the only place the
// client tells it; a change of that message would leave coordinator_addr empty, never wrong.
//
// What it must never do: use a range (it runs no query and no execution), or outlive a leave: after
// SIGTERM it calls Leave once and exits, whatever Leave returned. A SIGKILL or SIGSTOP is the
// benchmark's business; the probe does nothing to soften them.
//
//	go build -o /tmp/leaseprobe ./bench/leaseprobe
//	/tmp/leaseprobe -worker-id p1 -coordinators 127.0.0.1:7878 -region bench -cluster c1 -service orders
package main
