package proctest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/retryring/retryring/internal/proc"
)

// KeepLogsEnv names the environment variable that, set to anything but "" or "0", keeps the log
// directory of a passing test too (and the keyspace of a failed end-to-end scenario).
const KeepLogsEnv = "E2E_KEEP_LOGS"

// tailLines is how much of each log a failed test prints.
const tailLines = 25

// NewGroup is a group for t, in a log directory of its own. When t ends, every process of the
// group is killed and reaped; if t failed, the log paths and their last lines are printed and the
// directory is kept, otherwise it is removed (unless E2E_KEEP_LOGS is set).
func NewGroup(t testing.TB) *proc.Group {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp("", "retryring-"+name+"-")
	if err != nil {
		t.Fatalf("proc: log dir: %v", err)
	}
	g, err := proc.GroupIn(dir)
	if err != nil {
		t.Fatalf("proc: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("proc: %v", err)
		}
		if t.Failed() {
			t.Logf("proc: logs kept in %s", dir)
			for _, p := range g.Processes() {
				t.Logf("proc: %s: %s (last lines):\n%s", p.Name(), p.LogPath(), p.Tail(tailLines))
			}
			return
		}
		if keep := os.Getenv(KeepLogsEnv); keep != "" && keep != "0" {
			t.Logf("proc: logs kept in %s (%s)", dir, KeepLogsEnv)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return g
}

// NewCluster is StartCluster for t, in a NewGroup, bounded by Options.Wait: it fails the test if
// the cluster does not start, and closes it when the test ends (before the group prints its logs).
func NewCluster(t testing.TB, opts proc.Options) *proc.Cluster {
	t.Helper()
	g := NewGroup(t)
	wait := opts.Wait
	if wait == 0 {
		wait = proc.DefaultWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := proc.StartCluster(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("proc: %v", err)
		}
	})
	return c
}
