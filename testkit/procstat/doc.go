// Package procstat reads what a process uses from Linux's /proc: CPU time (utime + stime of
// /proc/<pid>/stat), resident memory now and at its peak (VmRSS and VmHWM of /proc/<pid>/status),
// and a Sampler that measures one process over a span; and, for a machine shared with processes a
// benchmark did not start, the machine's busy CPU time (/proc/stat) and the processes whose
// command line matches (Find). The benchmarks report these figures for the coordinators,
// workers and Cassandra nodes they measure.
package procstat
