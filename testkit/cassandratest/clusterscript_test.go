package cassandratest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
)

// TestClusterScriptNamesTheLogOfANodeThatNeverCameUp runs `scripts/cassandra.sh cluster-start`
// with a fake JVM that exits at once, on addresses no real cluster uses (127.0.0.101 and up), and
// reads the error: it names the node, its address and its log file. No Cassandra is started.
func TestClusterScriptNamesTheLogOfANodeThatNeverCameUp(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	// A lib dir the script counts as complete, and the jamm jar its JVM arguments name.
	for name, content := range map[string]string{".complete": "cassandra-all 5.0.8\n", "jamm-0.4.0.jar": ""} {
		if err := os.WriteFile(filepath.Join(lib, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	java := filepath.Join(dir, "java")
	fake := "#!/bin/sh\nif [ \"$1\" = -version ]; then echo 'openjdk version \"17.0.15\"' >&2; exit 0; fi\necho 'fake JVM: refusing to start' >&2\nexit 1\n"
	if err := os.WriteFile(java, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	clusterDir := filepath.Join(dir, "cluster")
	out, err := runClusterScript(t, []string{
		"CASSANDRA_CLUSTER_DIR=" + clusterDir, "CASSANDRA_LIB_DIR=" + lib, "CASSANDRA_VERSION=5.0.8", "JAVA=" + java,
		"CASSANDRA_CLUSTER_NODES=2", "CASSANDRA_CLUSTER_FIRST_ADDRESS=101", "CASSANDRA_START_TIMEOUT=20",
	}, "cluster-start")
	if err == nil {
		t.Fatalf("cluster-start with a JVM that exits: no error\n%s", out)
	}
	for _, want := range []string{
		"node 1 (127.0.0.101) did not come up: see its log " + filepath.Join(clusterDir, "node1", "log", "system.log"),
		"node 2 (127.0.0.102) did not come up: see its log " + filepath.Join(clusterDir, "node2", "log", "system.log"),
		"fake JVM: refusing to start",
		"cluster start failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster-start's output lacks %q:\n%s", want, out)
		}
	}
}

// TestClusterScriptRefusesBadSettings reads the script's refusals of a cluster it cannot lay out.
func TestClusterScriptRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	for env, want := range map[string]string{
		"CASSANDRA_CLUSTER_NODES=0":         "CASSANDRA_CLUSTER_NODES must be a number from 1 to 20 (got '0')",
		"CASSANDRA_CLUSTER_DCS=4":           "CASSANDRA_CLUSTER_DCS must be a number from 1 to the node count 3 (got '4')",
		"CASSANDRA_CLUSTER_HEAP=big":        "CASSANDRA_CLUSTER_HEAP must look like 1G or 512M (got 'big')",
		"CASSANDRA_CLUSTER_FIRST_ADDRESS=1": "CASSANDRA_CLUSTER_FIRST_ADDRESS must be a number from 2 to 252 (got '1'): 127.0.0.1 is the shared node's",
	} {
		out, err := runClusterScript(t, []string{"CASSANDRA_CLUSTER_DIR=" + dir, env}, "cluster-start")
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("%s cluster-start: %v\n%s\nwant %q", env, err, out, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "layout"), []byte("nodes=3 dcs=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runClusterScript(t, []string{"CASSANDRA_CLUSTER_DIR=" + dir, "CASSANDRA_CLUSTER_DCS=2", "CASSANDRA_LIB_DIR=" + dir}, "cluster-start")
	want := "the cluster in " + dir + " was created with nodes=3 dcs=1, not nodes=3 dcs=2: run 'scripts/cassandra.sh cluster-wipe' first"
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("cluster-start with another layout: %v\n%s\nwant %q", err, out, want)
	}
	out, err = runClusterScript(t, []string{"CASSANDRA_CLUSTER_DIR=" + dir}, "cluster-kill", "4")
	if err == nil || !strings.Contains(out, "no node '4': nodes are 1 to 3") {
		t.Errorf("cluster-kill 4 of 3: %v\n%s", err, out)
	}
}

func runClusterScript(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "cassandra.sh"), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}
