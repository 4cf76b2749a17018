package benchkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// Run is where and when a benchmark without a Cassandra node ran (the coordinator's): the host,
// the command line, and the load average at its end (Machine has the one at its start).
type Run struct {
	Machine
	Command string
	LoadEnd string
}

// StartRun describes the host and the command now; set LoadEnd when the run is over.
func StartRun() Run { return Run{Machine: DescribeHost(), Command: Command()} }

// TempDir makes the run's directory for logs and data. The returned done removes it at the end
// of the run unless keep is set or the run failed (then logf says where it is, for a post-mortem).
func TempDir(prefix string, keep bool, logf func(format string, args ...any)) (dir string, done func(runErr error), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	return dir, func(runErr error) {
		if keep || runErr != nil {
			logf("logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}, nil
}

// Binary is the retryring binary a run starts: given when set, else one built from this checkout
// into dir.
func Binary(ctx context.Context, given, dir string, logf func(format string, args ...any)) (string, error) {
	if given != "" {
		return given, nil
	}
	root, err := proc.ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "retryring")
	logf("building ./cmd/retryring")
	if err := proc.Build(ctx, root, bin, false); err != nil {
		return "", err
	}
	return bin, nil
}

// Fail prints err on stderr after the program's name and exits with status 1: how every
// benchmark program ends when it cannot measure.
func Fail(err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", programName(os.Args[0]), err)
	os.Exit(1)
}

// Logf prints one progress line on stderr, stamped with the time of day to the millisecond, so
// that a figure's phases can be matched with the logs of the processes it started.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", time.Now().Format("15:04:05.000"), programName(os.Args[0]), fmt.Sprintf(format, args...))
}
