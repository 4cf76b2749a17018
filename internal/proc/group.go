package proc

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
)

// KeepLogsEnv names the environment variable that, set to anything but "" or "0", keeps the log
// directory of a passing test too (and the keyspace of a failed end-to-end scenario).
const KeepLogsEnv = "E2E_KEEP_LOGS"

// tailLines is how much of each log a failed test prints.
const tailLines = 25

// Group is every process of one test. NewGroup registers its Close with t.Cleanup.
type Group struct {
	t   testing.TB
	dir string

	mu    sync.Mutex
	procs []*Process
}

// NewGroup makes a log directory for t's processes. When t ends, every process of the group is
// killed and reaped; if t failed, the log paths and their last lines are printed and the directory
// is kept, otherwise it is removed (unless E2E_KEEP_LOGS is set).
func NewGroup(t testing.TB) *Group {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp("", "retryring-"+name+"-")
	if err != nil {
		t.Fatalf("proc: log dir: %v", err)
	}
	g := &Group{t: t, dir: dir}
	t.Cleanup(g.cleanup)
	return g
}

// Dir is the group's log directory (data directories go below it too).
func (g *Group) Dir() string { return g.dir }

// Launch launches spec with its log in the group's directory.
func (g *Group) Launch(spec Spec) (*Process, error) {
	spec.LogDir = g.dir
	p, err := Launch(spec)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p, nil
}

// Run is the package's Run for a process of the group (killed with the group if the test ends
// first).
func (g *Group) Run(ctx context.Context, spec Spec) (string, error) {
	spec.LogDir = g.dir
	return run(ctx, spec, g.Launch)
}

// Processes returns the group's processes in launch order.
func (g *Group) Processes() []*Process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Process(nil), g.procs...)
}

// KillAll sends SIGKILL to every process of the group and waits until each was reaped.
func (g *Group) KillAll() {
	var wg sync.WaitGroup
	for _, p := range g.Processes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Kill9(); err != nil {
				g.t.Errorf("proc: %v", err)
			}
		}()
	}
	wg.Wait()
}

func (g *Group) cleanup() {
	g.KillAll()
	keep := os.Getenv(KeepLogsEnv)
	if g.t.Failed() {
		g.t.Logf("proc: logs kept in %s", g.dir)
		for _, p := range g.Processes() {
			g.t.Logf("proc: %s: %s (last lines):\n%s", p.Name(), p.LogPath(), p.Tail(tailLines))
		}
		return
	}
	if keep != "" && keep != "0" {
		g.t.Logf("proc: logs kept in %s (%s)", g.dir, KeepLogsEnv)
		return
	}
	_ = os.RemoveAll(g.dir)
}
