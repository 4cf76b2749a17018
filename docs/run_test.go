package docs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A fileRun runs the marked blocks of one Markdown file, in order, in one scratch directory and
// one namespace.
type fileRun struct {
	t        *testing.T
	root     string // the module root
	work     string // the blocks' working directory; work/bin/retryring is the module's binary
	logs     string // each block's script and output
	keyspace string
	ns       *namespace
	env      []string
	bg       []*backgroundBlock
	charts   *chartRenderer
}

// A backgroundBlock is a running background block: its bash waits on the processes it started.
type backgroundBlock struct {
	b    block
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

var keyspaceFlag = regexp.MustCompile(`(--keyspace[ =])retryring\b`)

// script is the block's text as it runs: the keyspace is the test's own (package doc).
func (r *fileRun) script(b block) string {
	return keyspaceFlag.ReplaceAllString(b.text, "${1}"+r.keyspace)
}

// command returns bash running a script file inside the namespace, in its own process group, its
// output appended to log.
func (r *fileRun) command(ctx context.Context, script, log string) (*exec.Cmd, *os.File) {
	args := append(r.ns.nsenter(r.work), "bash", "--noprofile", "--norc", "-e", "-o", "pipefail", script)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = r.work
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

func (r *fileRun) writeScript(b block, suffix string) (script, log string) {
	script = filepath.Join(r.logs, b.name+".sh")
	if err := os.WriteFile(script, []byte(r.script(b)+suffix), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return script, filepath.Join(r.logs, b.name+".log")
}

// runForeground runs a runnable block to its end, again once a second while it fails within its
// retry time. Whatever it left running is killed with its process group.
func (r *fileRun) runForeground(b block) {
	script, log := r.writeScript(b, "")
	deadline := time.Now().Add(b.retry)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), b.limit)
		cmd, out := r.command(ctx, script, log)
		fmt.Fprintf(out, "--- %s, run %d\n", b, attempt)
		err := cmd.Start()
		if err == nil {
			err = cmd.Wait()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		timedOut := ctx.Err() != nil
		cancel()
		out.Close()
		if err == nil {
			r.t.Logf("%s: ran as written (run %d)", b, attempt)
			if testing.Verbose() {
				r.t.Log(tail(log))
			}
			return
		}
		if timedOut {
			r.t.Fatalf("%s did not end within %s (timeout=): its output:\n%s", b, b.limit, tail(log))
		}
		if time.Now().After(deadline) {
			how := ""
			if b.retry > 0 {
				how = fmt.Sprintf(" (ran %d times in %s, retry=)", attempt, b.retry)
			}
			r.t.Fatalf("%s failed as written%s: %v; its output:\n%s", b, how, err, tail(log))
		}
		r.checkBackground()
		time.Sleep(time.Second)
	}
}

// startBackground starts a background block; bash then waits until one of its processes exits.
func (r *fileRun) startBackground(b block) {
	script, log := r.writeScript(b, "\nwait -n\n")
	cmd, out := r.command(context.Background(), script, log)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", b, err)
	}
	bb := &backgroundBlock{b: b, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		bb.err = cmd.Wait()
		out.Close()
		close(bb.done)
	}()
	r.bg = append(r.bg, bb)
}

// checkBackground fails the test if a background block's process has ended.
func (r *fileRun) checkBackground() {
	r.t.Helper()
	for _, bb := range r.bg {
		select {
		case <-bb.done:
			r.t.Fatalf("%s: a process it started ended before the run did (%v): its output:\n%s", bb.b, bb.err, tail(bb.log))
		default:
		}
	}
}

// stopBackground ends every background block's process group: SIGTERM, then SIGKILL after 15 s.
func (r *fileRun) stopBackground() {
	for _, bb := range r.bg {
		_ = syscall.Kill(-bb.cmd.Process.Pid, syscall.SIGTERM)
	}
	grace := time.After(15 * time.Second)
	for _, bb := range r.bg {
		select {
		case <-bb.done:
		case <-grace:
		}
		_ = syscall.Kill(-bb.cmd.Process.Pid, syscall.SIGKILL)
		<-bb.done
	}
}

// tail is the end of a log, for a failure message.
func tail(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = append([]string{"..."}, lines[len(lines)-40:]...)
	}
	return "    " + strings.Join(lines, "\n    ")
}

// blockEnv is the blocks' environment: the test's, without RETRYRING_* variables, with work/bin
// first on PATH and the test's keyspace.
func blockEnv(work, keyspace string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RETRYRING_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+filepath.Join(work, "bin")+":"+os.Getenv("PATH"), "RETRYRING_KEYSPACE="+keyspace)
}

// linkBinary puts the module's bin/retryring at work/bin/retryring.
func linkBinary(root, work string) error {
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		return err
	}
	return os.Symlink(filepath.Join(root, "bin", "retryring"), filepath.Join(work, "bin", "retryring"))
}

// runCommand runs a program on the host (not in the namespace) and returns its output.
func runCommand(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return out.Bytes(), fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), nil
}
