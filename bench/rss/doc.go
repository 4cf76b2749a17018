// Command rss measures figure 3 of docs/benchmarks.md: the peak resident memory of a worker
// process that drains 150,000 failures at concurrency 100.
//
// The parent writes a backdated history through the recorder's late protocol into a keyspace of
// its own (bench_rss_*), then starts this same program again as a child (-child) that does
// nothing but the worker's job: one session, one cassandra.Store, one worker.Scanner holding the
// whole ring as Node-0 under a static lease, a no-op executor, cycles until nothing is left. The
// child reports its own peak RSS (VmHWM of /proc/self/status, read just before it exits) and the
// Go runtime's view (heap in use sampled every 20 ms, GC cycles); the parent polls the child's
// /proc/<pid>/status every 20 ms as a cross-check. getrusage's ru_maxrss is not used: Go starts
// children with vfork, and Linux charges the parent's peak RSS to the child when it execs.
//
// The baseline, in the same run: the same child started on an empty directory (a service with no
// failures), which connects, runs one idle cycle and exits: the memory of the process and the
// driver without any retry work.
//
// It must never assert on a timing or a size, or touch another keyspace.
//
//	go run ./bench/rss -windows 3 -instances 5 -rows 10000 -concurrency 100
package main
