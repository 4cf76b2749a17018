package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

var (
	// binary is the retryring binary every scenario runs.
	binary string
	// root is the module root (scripts/cassandra.sh lives there).
	root string
	// subcommands lists what the binary offers ("worker", "coordinator", ...).
	subcommands map[string]bool
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = proc.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binary = os.Getenv("E2E_BIN")
	if binary == "" {
		dir, err := os.MkdirTemp("", "retryring-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "retryring")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = proc.Build(ctx, root, binary, os.Getenv("E2E_RACE") == "1")
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	subcommands = map[string]bool{}
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %s --help: %v\n%s", binary, err, out)
		return 1
	}
	inCommands := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Available Commands:"):
			inCommands = true
		case inCommands && strings.TrimSpace(line) == "":
			inCommands = false
		case inCommands:
			if f := strings.Fields(line); len(f) > 0 {
				subcommands[f[0]] = true
			}
		}
	}
	return m.Run()
}

// requireBinary fails the test when the binary lacks a subcommand a scenario needs.
func requireBinary(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if !subcommands[c] {
			t.Fatalf("%s has no %q subcommand", binary, c)
		}
	}
}
