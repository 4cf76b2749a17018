package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/proctest"
)

// coordinatorArgs are the arguments of a coordinator on loopback ports the kernel picks.
func coordinatorArgs(id, dataDir string, extra ...string) []string {
	return append([]string{"coordinator", "--node-id", id, "--data-dir", dataDir, "--unsafe-no-sync",
		"--raft-addr", "127.0.0.1:0", "--rsocket-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, extra...)
}

// runCoordinator runs the coordinator command in this process until it returns, within 20 s.
func runCoordinator(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := runCommand(ctx, args...)()
	if ctx.Err() != nil {
		t.Fatalf("coordinator %v still running after 20s (err %v)", args, err)
	}
	return err
}

// Each --peers typo of the newcomer stops the coordinator at start, in one line naming the entry.
func TestCoordinatorRefusesPeersTypos(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	_ = l.Close()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"semicolons": {[]string{"--peers", "x1=127.0.0.1:27501;x2=127.0.0.1:27502"},
			`--peers entry "x1=127.0.0.1:27501;x2=127.0.0.1:27502": separate entries with commas`},
		"missing port": {[]string{"--peers", "x1=127.0.0.1"}, `--peers entry "x1=127.0.0.1": raft address "127.0.0.1" has no port`},
		"own entry differs": {[]string{"--raft-addr", free, "--peers", "x1=127.0.0.1:1,x2=127.0.0.1:2"},
			`--peers entry "x1=127.0.0.1:1" is not this node's raft address: it listens on ` + free + ` (--raft-addr)`},
		"own entry differs from --raft-advertise": {[]string{"--raft-advertise", "x1.svc:7400", "--peers", "x1=x1.other:7400"},
			`--peers entry "x1=x1.other:7400" is not this node's raft address: it advertises x1.svc:7400 (--raft-advertise)`},
		"duplicate id":         {[]string{"--peers", "x1=127.0.0.1:1,x1=127.0.0.1:2"}, `node id "x1" listed twice`},
		"replace without join": {[]string{"--replace"}, "--replace goes with --join"},
	} {
		err := runCoordinator(t, append(coordinatorArgs("x1", t.TempDir()), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %q", name, err, tc.want)
		}
	}
}

// A second c3 started with --join exits with the cluster's refusal, not a retry loop.
func TestCoordinatorExitsWhenItsJoinIsRefused(t *testing.T) {
	nodes := startCluster(t)
	err := runCoordinator(t, coordinatorArgs("c3", t.TempDir(), "--join", nodes[0].HTTPAddr(), "--log-level", "fatal")...)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "coordinator: join refused by "+nodes[0].HTTPAddr()+": node id c3 is a voter already, at "+nodes[2].RaftAddr()) ||
		!strings.Contains(err.Error(), "ctl remove-peer c3") {
		t.Fatalf("a second c3 joining: %v, want one line of the refusal", err)
	}
}

// Two coordinator processes on one data dir: the second exits at once naming the first's pid.
func TestSecondProcessOnADataDirIsRefused(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "retryring")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := proc.Build(ctx, root, bin, false); err != nil {
		t.Fatal(err)
	}
	g := proctest.NewGroup(t)
	dir := t.TempDir()
	first, err := g.Launch(proc.Spec{Name: "first", Path: bin, Args: coordinatorArgs("c1", dir)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !first.LogContains("coordinator started") {
		if time.Now().After(deadline) || !first.Running() {
			t.Fatalf("the first coordinator did not start:\n%s", first.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	runCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	out, err := g.Run(runCtx, proc.Spec{Name: "second", Path: bin, Args: coordinatorArgs("c1", dir)})
	want := "retryring: coordinator: data dir " + dir + " is in use by pid " + strconv.Itoa(first.Pid()) + ": stop it, or give this node its own --data-dir"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("second coordinator on %s: %v\n%s\nwant %q", dir, err, out, want)
	}
	if regexp.MustCompile(`open raft log|timeout`).MatchString(out) {
		t.Fatalf("the second coordinator waited on raft.db:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lock")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(first.Pid()) {
		t.Fatalf("lock file %q (%v), want the first's pid %d", b, err, first.Pid())
	}
}
