package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MachineBusyTicks is the CPU time all cores spent on anything but idle and I/O wait since boot
// (user, nice, system, irq, softirq and steal of the "cpu" line of /proc/stat), in clock ticks:
// what every process of the machine used, the ones a benchmark does not know of included.
func MachineBusyTicks() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu total", line)
	}
	var busy int64
	// user nice system idle iowait irq softirq steal: all but idle (4) and iowait (5).
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d %q", i, f[i])
		}
		busy += n
	}
	return busy, nil
}

// Cmdline reads the arguments pid was started with (/proc/<pid>/cmdline).
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}

// Find returns the processes whose command line match accepts. Processes that exit while it
// reads are skipped.
func Find(match func(cmdline []string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if args, err := Cmdline(pid); err == nil && match(args) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// TicksPerSecond converts ticks of CPUTicks and MachineBusyTicks to seconds.
const TicksPerSecond = clockTicks
