package benchkit

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// Machine describes where and when a figure was measured.
type Machine struct {
	When        time.Time
	CPUs        int    // runtime.NumCPU (nproc)
	CPUModel    string // model name of /proc/cpuinfo
	Kernel      string // uname -r
	MemTotal    string // MemTotal of /proc/meminfo
	Go          string
	JDK         string // first line of `java -version`
	Cassandra   string // release_version of the node
	CommitLog   string // commitlog_sync of the node
	WarnAt      string // tombstone_warn_threshold
	FailAt      string // tombstone_failure_threshold
	LoadAvgFrom string // /proc/loadavg when the run started
}

// Describe reads the machine and the Cassandra node's settings.
func Describe(ctx context.Context, s *gocql.Session) Machine {
	m := DescribeHost()
	if out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput(); err == nil {
		m.JDK, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	_ = s.Query(`SELECT release_version FROM system.local`).WithContext(ctx).Scan(&m.Cassandra)
	m.CommitLog = setting(ctx, s, "commitlog_sync")
	m.WarnAt = setting(ctx, s, "tombstone_warn_threshold")
	m.FailAt = setting(ctx, s, "tombstone_failure_threshold")
	return m
}

// DescribeHost reads the machine alone, for the benchmarks that run no Cassandra (the
// coordinator's): its CPUs and their model, memory, kernel, Go and the load average now.
func DescribeHost() Machine {
	m := Machine{When: time.Now().UTC(), CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadAvgFrom: LoadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				m.MemTotal = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func setting(ctx context.Context, s *gocql.Session, name string) string {
	var v string
	_ = s.Query(`SELECT value FROM system_views.settings WHERE name = ?`, name).WithContext(ctx).Scan(&v)
	return v
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Print writes the description as the header of a figure.
func (m Machine) Print(w io.Writer, command string) {
	fmt.Fprintf(w, "command:   %s\n", command)
	fmt.Fprintf(w, "date:      %s\n", m.When.Format(time.RFC3339))
	fmt.Fprintf(w, "machine:   %d CPUs, %s RAM, kernel %s, %s, %s\n", m.CPUs, m.MemTotal, m.Kernel, m.Go, m.JDK)
	fmt.Fprintf(w, "cassandra: %s, commitlog_sync %s, tombstone_warn_threshold %s, tombstone_failure_threshold %s\n",
		m.Cassandra, m.CommitLog, m.WarnAt, m.FailAt)
	fmt.Fprintf(w, "load avg:  %s at the start\n", m.LoadAvgFrom)
}

// Command is the command line that started this program, for the figure's header. A `go run`
// binary is named after its package directory.
func Command() string {
	args := append([]string{}, os.Args...)
	if len(args) > 0 && strings.Contains(args[0], "go-build") {
		args[0] = "go run ./bench/" + programName(args[0])
	}
	return strings.Join(args, " ")
}

func programName(path string) string {
	i := strings.LastIndexByte(path, '/')
	return path[i+1:]
}
