// Package procstat reads what a process uses from Linux's /proc: CPU time (utime + stime of
// /proc/<pid>/stat), resident memory now and at its peak (VmRSS and VmHWM of /proc/<pid>/status),
// and a Sampler that measures one process over a span. The benchmarks report these figures for the
// coordinators and workers they start.
package procstat
