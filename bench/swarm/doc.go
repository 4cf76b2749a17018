// Command swarm measures what the coordinators cost, and what a coordinator fault costs, a fleet
// of hundreds of workers: 3 `retryring coordinator` processes on loopback (a proc.Cluster without
// workers, as bench/ringbench starts them) and N real lease clients (worker/leaseclient, the
// client production workers run) in this one process, each with its own RSocket connection,
// worker i in ring i mod N/10 (testkit/swarm). For each swarm size (-workers) and lease timing
// (-timing: old = TTL 3 s / renewal 1 s, new = TTL 10 s / renewal 2 s), all in one run:
//   - join storm: every client starts at once; until every ring is settled in the leader's view
//     (exactly its clients as active members covering the ring, each client's guard holding what
//     the leader assigned it), with the leader's CPU and RSS meanwhile (from /proc);
//   - steady renewals for -steady: the leader's CPU and RSS (nothing polls it meanwhile), its
//     read(2) and write(2) calls a second (/proc/PID/io: about one per frame, KEEPALIVEs and
//     their answers most of them), the
//     lease age at receipt (how long each demand waited for its element), p50 and p99, and the
//     Raft log's growth (the leader's commit index on /metrics, read before and after);
//   - a kill -9 of the leader: until another node says it leads; per worker, whether its lease ran
//     out before its first element from another coordinator, the longest lapse, how long until
//     every worker was renewed by another node (p50, max), rings whose membership changed and
//     workers with a new assignment (the leader's committed state before and after, and the
//     leases' generations and epochs), overlaps (two workers of one ring usable on one token at
//     one instant, on this process's clock), and the sessions that ended at the dead node and the
//     redirects to it (counted from the lease client's log lines); then the node comes back;
//   - a rolling restart by SIGTERM, c3, c2, c1, each brought back and every node ready and every
//     ring settled before the next: per step, the workers that had a lapse and their longest.
//
// It prints a markdown table (one column per size and timing) with the command, the machine, the
// date and the load average, and the binary's version: run it once with -binary of an older build
// and once with the new one to compare. It never asserts on a timing. Before it starts it checks
// that the file descriptor limit holds one socket per worker here and in the leader, and stops
// with the limit to set if not.
//
// What it must never do: leave a process behind (every coordinator runs in a process group of
// internal/proc and dies with this process), listen on or dial anything but loopback, or run
// without a bound (-max-run for the whole run, -settle-bound and -renew-bound for every wait).
//
//	go run ./bench/swarm                                  # 200 and 1,000 workers, old and new timing
//	go run ./bench/swarm -workers 50 -timing new -steady 10s
//	go run ./bench/swarm -binary /tmp/retryring-old -out /tmp/old.md
package main
