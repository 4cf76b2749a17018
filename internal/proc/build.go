package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the directory holding go.mod, found from the working directory upwards.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("proc: no go.mod above %s", dir)
		}
	}
}

// Build compiles ./cmd/retryring of the module at root into out, with the race detector when
// race is set. The Go build cache makes a rebuild of an unchanged tree take about a second.
func Build(ctx context.Context, root, out string, race bool) error {
	return BuildPackage(ctx, root, "./cmd/retryring", out, race)
}

// BuildPackage compiles the main package pkg ("./bench/leaseprobe") of the module at root into
// out, without this process's RETRYRING_* environment, with the build tags given ("skewclock":
// a test build, see package wallclock).
func BuildPackage(ctx context.Context, root, pkg, out string, race bool, tags ...string) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = childEnv(os.Environ())
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("proc: go %v: %w\n%s", args, err, b)
	}
	return nil
}
