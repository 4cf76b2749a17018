package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports (the kernel fixes it for user space whatever CONFIG_HZ is).
const clockTicks = 100

// CPUTicks reads utime + stime of pid from /proc/<pid>/stat. The command name (field 2) may
// hold spaces and parentheses, so the fields are counted from the last ')'.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + st, nil
}

// RSSKiB reads VmRSS of pid from /proc/<pid>/status.
func RSSKiB(pid int) (int64, error) {
	return statusKiB(pid, "VmRSS:")
}

// statusKiB reads one "Name:   1234 kB" line of /proc/<pid>/status.
func statusKiB(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, strings.TrimSuffix(name, ":"))
}

// PeakRSSKiB reads VmHWM (the peak resident set size) of pid from /proc/<pid>/status. Unlike
// getrusage's ru_maxrss it is not charged the parent's peak at exec (Go starts children with
// vfork), so it is the figure to read for a child.
func PeakRSSKiB(pid int) (int64, error) {
	return statusKiB(pid, "VmHWM:")
}

// Usage is what one process used over a span.
type Usage struct {
	CPUPercent float64 // of one core, over the span
	PeakRSSMiB float64 // the highest VmRSS sampled
	LastRSSMiB float64 // VmRSS at the end
	Err        error
}

func (u Usage) String() string {
	if u.Err != nil {
		return "? (" + u.Err.Error() + ")"
	}
	return fmt.Sprintf("%.1f %% / %.0f MB", u.CPUPercent, u.LastRSSMiB)
}

// Sampler measures one process's CPU time over a span and samples its RSS every period.
type Sampler struct {
	pid   int
	start time.Time
	ticks int64
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	peak int64
	last int64
	err  error
}

// Sample starts measuring pid; Finish ends the span.
func Sample(pid int, period time.Duration) *Sampler {
	s := &Sampler{pid: pid, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	s.ticks, s.err = CPUTicks(pid)
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			s.rss()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *Sampler) rss() {
	kib, err := RSSKiB(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.last = kib
	s.peak = max(s.peak, kib)
}

// Finish ends the span and returns what the process used in it.
func (s *Sampler) Finish() Usage {
	close(s.stop)
	<-s.done
	s.rss()
	end, err := CPUTicks(s.pid)
	wall := time.Since(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	u := Usage{PeakRSSMiB: float64(s.peak) / 1024, LastRSSMiB: float64(s.last) / 1024, Err: s.err}
	if s.err == nil && wall > 0 {
		u.CPUPercent = float64(end-s.ticks) / clockTicks / wall.Seconds() * 100
	}
	return u
}

// Syscalls is how many read and write system calls a process made so far (syscr and syscw of
// /proc/<pid>/io, all its threads), whatever they read or wrote: on a coordinator that serves
// mostly small frames it counts the frames, one read(2) or write(2) each, plus Raft's.
type Syscalls struct {
	Reads, Writes int64
}

// ReadSyscalls reads syscr and syscw of pid from /proc/<pid>/io.
func ReadSyscalls(pid int) (Syscalls, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return Syscalls{}, err
	}
	var s Syscalls
	var seen int
	for _, l := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(l, ":")
		if !ok || (name != "syscr" && name != "syscw") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return Syscalls{}, fmt.Errorf("/proc/%d/io: %s %q", pid, name, v)
		}
		if name == "syscr" {
			s.Reads = n
		} else {
			s.Writes = n
		}
		seen++
	}
	if seen != 2 {
		return Syscalls{}, fmt.Errorf("/proc/%d/io: no syscr and syscw", pid)
	}
	return s, nil
}
