package helm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

var (
	// root is the module root; the chart is root/deploy/helm/retryring.
	root string
	// binary is the retryring binary built for this run.
	binary string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = proc.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "retryring-helm-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "retryring")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	err = proc.Build(ctx, root, binary, false)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm:", err)
		return 1
	}
	return m.Run()
}

// chartDir is the chart's directory.
func chartDir() string { return filepath.Join(root, "deploy", "helm", "retryring") }

// helmPath finds helm: $RETRYRING_HELM, else bin/helm of the module (where `make chart-check`
// installs it). Without one the test is skipped, or fails under RETRYRING_REQUIRE_HELM=1.
func helmPath(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("RETRYRING_HELM"), filepath.Join(root, "bin", "helm")}
	for _, p := range candidates {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	msg := "helm not found in bin/ (nor $RETRYRING_HELM): run `make chart-check`, which installs it"
	if os.Getenv("RETRYRING_REQUIRE_HELM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
