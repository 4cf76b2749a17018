package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTermIsGraceful(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "http")
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if err := p.Term(10 * time.Second); err != nil {
		t.Fatalf("Term: %v", err)
	}
	if p.Running() || !p.LogContains("graceful") {
		t.Fatalf("running %v, log:\n%s", p.Running(), p.Tail(10))
	}
	if !p.LogContains("exited") || !p.LogContains("launch 1") {
		t.Fatalf("log lacks proc's own lines:\n%s", p.Tail(10))
	}
}

func TestStopFreezesContResumesKill9Ends(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "http")
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Stopped() || !p.Running() {
		t.Fatal("a stopped process must count as running and stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, _, err := get(ctx, url)
	cancel()
	if err == nil {
		t.Fatal("a stopped process answered")
	}
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
	if err := p.Kill9(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.ExitErr() == nil {
		t.Fatalf("after Kill9: running %v, exit %v", p.Running(), p.ExitErr())
	}
	if err := p.Stop(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Stop of an exited process: %v", err)
	}
	if err := p.Kill9(); err != nil {
		t.Fatalf("Kill9 of an exited process: %v", err)
	}
}

func TestTermOfAStoppedProcessResumesIt(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "http")
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Term(10 * time.Second); err != nil {
		t.Fatalf("Term: %v", err)
	}
	if !p.LogContains("graceful") {
		t.Fatalf("log:\n%s", p.Tail(10))
	}
}

func TestTermKillsAProcessThatIgnoresIt(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "ignore-term")
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if err := p.Term(300 * time.Millisecond); !errors.Is(err, ErrTermTimeout) {
		t.Fatalf("Term: %v, want ErrTermTimeout", err)
	}
	if p.Running() {
		t.Fatal("still running")
	}
}

func TestRestartAppendsToTheSameLog(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "http")
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart while running: %v", err)
	}
	first := p.Pid()
	if err := p.Kill9(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := WaitOK(bounded(t), p, url); err != nil {
		t.Fatal(err)
	}
	if p.Pid() == first || p.Launches() != 2 || !p.LogContains("launch 2") || !p.LogContains("signal: killed") {
		t.Fatalf("pid %d (first %d), launches %d, log:\n%s", p.Pid(), first, p.Launches(), p.Tail(20))
	}
}

func TestWaitOKReportsALostPortRace(t *testing.T) {
	g := newTestGroup(t)
	p, url := launchHelper(t, g, "h", "bind-fail")
	if err := WaitOK(bounded(t), p, url); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("WaitOK: %v, want ErrPortInUse", err)
	}
}

func TestWaitOKFailsFastWhenTheProcessExits(t *testing.T) {
	g := newTestGroup(t)
	exe, _ := os.Executable()
	p, err := g.Launch(Spec{Name: "h", Path: exe, Env: []string{helperEnv + "=env"}})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := FreeAddr()
	if err := WaitOK(bounded(t), p, "http://"+addr+"/healthz"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("WaitOK: %v, want ErrNotRunning", err)
	}
}

func TestRunDropsRetryringEnvironment(t *testing.T) {
	t.Setenv("RETRYRING_CASSANDRA", "10.0.0.1:9042")
	exe, _ := os.Executable()
	out, err := Run(bounded(t), Spec{Name: "env", Path: exe, LogDir: t.TempDir(),
		Env: []string{helperEnv + "=env", "PROC_EXTRA=1", "RETRYRING_KEYSPACE=given"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "RETRYRING_CASSANDRA") || !strings.Contains(out, "PROC_EXTRA=1") || !strings.Contains(out, "RETRYRING_KEYSPACE=given") {
		t.Fatalf("output:\n%s", out)
	}
	if strings.Contains(out, "=== proc") {
		t.Fatalf("Run's output holds proc's own lines:\n%s", out)
	}
}

func TestRunKillsOnContextEnd(t *testing.T) {
	exe, _ := os.Executable()
	addr, _ := FreeAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, Spec{Name: "h", Path: exe, LogDir: t.TempDir(), Env: []string{helperEnv + "=http", "PROC_HELPER_ADDR=" + addr}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v", err)
	}
}

// alive reports whether pid exists (and is not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, ok := statState(b)
	return !ok || st != 'Z'
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// launchServingAndStopped launches two helpers into g, a serving one and a stopped one (which
// must die with the group too), and returns their pids.
func launchServingAndStopped(t *testing.T, g *Group) []int {
	t.Helper()
	var pids []int
	for _, name := range []string{"a", "b"} {
		p, url := launchHelper(t, g, name, "http")
		if err := WaitOK(bounded(t), p, url); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p.Pid())
	}
	if err := g.Processes()[1].Stop(); err != nil {
		t.Fatal(err)
	}
	return pids
}

func TestGroupCleanupLeavesNoProcess(t *testing.T) {
	var pids []int
	t.Run("inner", func(t *testing.T) {
		pids = launchServingAndStopped(t, newTestGroup(t))
	})
	for _, pid := range pids {
		waitDead(t, pid)
	}
}

func TestChildDiesWithItsParent(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux (Pdeathsig, /proc)")
	}
	g := newTestGroup(t)
	exe, _ := os.Executable()
	parent, err := g.Launch(Spec{Name: "parent", Path: exe, Env: []string{helperEnv + "=parent", "PROC_HELPER_DIR=" + g.Dir()}})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`grandchild pid (\d+)`)
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		if m := re.FindStringSubmatch(parent.Tail(5)); m != nil {
			pid, _ = strconv.Atoi(m[1])
			break
		}
		if time.Now().After(deadline) || !parent.Running() {
			t.Fatalf("no grandchild pid; log:\n%s", parent.Tail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(pid) {
		t.Fatalf("grandchild %d not running", pid)
	}
	// Only the parent: SIGKILL to its pid, not its group (the grandchild has a group of its own).
	if err := syscall.Kill(parent.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pid)
}

func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

func TestGroupCloseKillsEveryProcessAndKeepsTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	g, err := GroupIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	pids := launchServingAndStopped(t, g)
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range pids {
		waitDead(t, pid)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.log")); err != nil {
		t.Fatalf("Close removed the logs: %v", err)
	}
}
