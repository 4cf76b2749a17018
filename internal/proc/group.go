package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Group is every process of one user of the package (a test, the demo, a benchmark), with their
// logs in one directory.
type Group struct {
	dir string

	mu    sync.Mutex
	procs []*Process
}

// GroupIn makes a group whose logs (and coordinators' data) go in dir, created if missing. The
// directory stays the caller's: Close kills the processes and leaves it.
func GroupIn(dir string) (*Group, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("proc: log dir: %w", err)
	}
	return &Group{dir: dir}, nil
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

// Run is the package's Run for a process of the group (killed with the group if the group is
// closed first).
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

// Close sends SIGKILL to every process of the group (a stopped one too) and waits until each was
// reaped. It may be called again, and concurrently with anything else on the group.
func (g *Group) Close() error {
	procs := g.Processes()
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Kill9()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
