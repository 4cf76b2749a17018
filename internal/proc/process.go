package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec is what to launch.
type Spec struct {
	// Name names the process in logs and its log file (<LogDir>/<Name>.log). Required.
	Name string
	// Path is the binary. Required.
	Path string
	Args []string
	// Env is added to this process's environment, from which every RETRYRING_* variable was
	// removed (the binary reads its flags from them).
	Env []string
	// Dir is the working directory. Default: this process's.
	Dir string
	// LogDir holds the log file. Required.
	LogDir string
}

// DefaultKillWait bounds how long Kill9 and Term wait for the kernel to reap a killed process.
const DefaultKillWait = 10 * time.Second

// Process is a launched binary. Its methods are safe for concurrent use.
type Process struct {
	spec    Spec
	logPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current launch has been reaped
	waitErr  error
	stopped  bool // SIGSTOP sent and no SIGCONT since
	launches int
}

// Launch starts spec in a process group of its own, its stdout and stderr appended to its log.
func Launch(spec Spec) (*Process, error) {
	if spec.Name == "" || spec.Path == "" || spec.LogDir == "" {
		return nil, fmt.Errorf("proc: spec needs a name, a path and a log dir: %+v", spec)
	}
	p := &Process{spec: spec, logPath: filepath.Join(spec.LogDir, spec.Name+".log")}
	if err := p.launch(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the spec's name.
func (p *Process) Name() string { return p.spec.Name }

// LogPath is the file holding the output of every launch.
func (p *Process) LogPath() string { return p.logPath }

// Args is the command line after the binary.
func (p *Process) Args() []string { return append([]string(nil), p.spec.Args...) }

// SetArgs replaces the command line used by the next Restart.
func (p *Process) SetArgs(args []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spec.Args = append([]string(nil), args...)
}

func (p *Process) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.exited) {
		return ErrRunning
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("proc: log of %s: %w", p.spec.Name, err)
	}
	p.launches++
	fmt.Fprintf(logf, "=== proc: launch %d of %s at %s: %s %s\n", p.launches, p.spec.Name,
		time.Now().Format(time.RFC3339Nano), p.spec.Path, strings.Join(p.spec.Args, " "))
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = append(childEnv(os.Environ()), p.spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("proc: launch %s: %w", p.spec.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.waitErr, p.stopped = cmd, exited, nil, false
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logf, "=== proc: %s (pid %d) exited at %s: %v\n", p.spec.Name, cmd.Process.Pid,
			time.Now().Format(time.RFC3339Nano), exitText(err))
		logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// childEnv drops every RETRYRING_* variable.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "RETRYRING_") {
			out = append(out, kv)
		}
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// current returns the command and exit channel of the current launch.
func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.exited
}

// Pid is the process id of the current launch (also its process group id).
func (p *Process) Pid() int {
	cmd, _ := p.current()
	if cmd == nil {
		return 0
	}
	return cmd.Process.Pid
}

// Running reports whether the current launch has not exited (a stopped process is running).
func (p *Process) Running() bool {
	cmd, exited := p.current()
	return cmd != nil && !isClosed(exited)
}

// Stopped reports whether the process was sent SIGSTOP and not SIGCONT since.
func (p *Process) Stopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped && !isClosed(p.exited)
}

// Exited is closed when the current launch has exited and been reaped.
func (p *Process) Exited() <-chan struct{} {
	_, exited := p.current()
	return exited
}

// ExitErr is the current launch's exit: nil for status 0, an *exec.ExitError otherwise. It is
// meaningful only after Exited is closed.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// signal sends sig to the process group of the current launch.
func (p *Process) signal(sig syscall.Signal) error {
	cmd, exited := p.current()
	if cmd == nil || isClosed(exited) {
		return ErrNotRunning
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return ErrNotRunning
		}
		return fmt.Errorf("proc: signal %v to %s: %w", sig, p.spec.Name, err)
	}
	return nil
}

// Kill9 sends SIGKILL to the process group and waits (at most DefaultKillWait) until the process
// was reaped. Killing a process that already exited is not an error.
func (p *Process) Kill9() error {
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return p.waitExit(DefaultKillWait)
}

// Stop freezes the process group (SIGSTOP) and returns once the process is stopped (on Linux,
// where that can be seen). The process keeps its sockets open but does nothing.
func (p *Process) Stop() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return waitStopped(p.Pid(), DefaultKillWait)
}

// Cont resumes a stopped process group (SIGCONT).
func (p *Process) Cont() error {
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	p.mu.Lock()
	p.stopped = false
	p.mu.Unlock()
	return nil
}

// Term asks the process to shut down gracefully (SIGTERM, and SIGCONT if it was stopped, since a
// stopped process cannot act on SIGTERM) and waits for it to exit, at most until timeout. A
// process still running then is killed and ErrTermTimeout returned. Otherwise Term returns the
// exit: nil for status 0.
func (p *Process) Term(timeout time.Duration) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if p.Stopped() {
		_ = p.Cont()
	}
	select {
	case <-p.Exited():
		return p.ExitErr()
	case <-time.After(timeout):
	}
	if err := p.Kill9(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s did not exit within %v", ErrTermTimeout, p.spec.Name, timeout)
}

// Wait waits until the current launch exits or ctx ends, and returns its exit.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.Exited():
		return p.ExitErr()
	case <-ctx.Done():
		return fmt.Errorf("proc: waiting for %s to exit: %w", p.spec.Name, ctx.Err())
	}
}

func (p *Process) waitExit(bound time.Duration) error {
	select {
	case <-p.Exited():
		return nil
	case <-time.After(bound):
		return fmt.Errorf("proc: %s (pid %d) not reaped %v after SIGKILL", p.spec.Name, p.Pid(), bound)
	}
}

// Restart launches the same command line again (or the one SetArgs gave), appending to the same
// log. The process must have exited: Kill9 or Term it first.
func (p *Process) Restart() error { return p.launch() }

// Launches counts the launches so far.
func (p *Process) Launches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.launches
}

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string { return tailFile(p.logPath, n) }

// LogContains reports whether the log holds s.
func (p *Process) LogContains(s string) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(b, []byte(s))
}

// tailLimit bounds how much of a log Tail reads.
const tailLimit = 256 << 10

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	off := max(st.Size()-tailLimit, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Run launches spec and waits until it exits or ctx ends (then it is killed). It returns the
// output of this run (also in the log) and the exit: nil for status 0.
func Run(ctx context.Context, spec Spec) (string, error) {
	return run(ctx, spec, Launch)
}

func run(ctx context.Context, spec Spec, launch func(Spec) (*Process, error)) (string, error) {
	before := int64(0)
	if st, err := os.Stat(filepath.Join(spec.LogDir, spec.Name+".log")); err == nil {
		before = st.Size()
	}
	p, err := launch(spec)
	if err != nil {
		return "", err
	}
	select {
	case <-p.Exited():
	case <-ctx.Done():
		_ = p.Kill9()
	}
	out := readFrom(p.logPath, before)
	if ctx.Err() != nil {
		return out, fmt.Errorf("proc: %s: %w", spec.Name, ctx.Err())
	}
	if err := p.ExitErr(); err != nil {
		return out, fmt.Errorf("proc: %s: %w: %s", spec.Name, err, lastLines(out, 5))
	}
	return out, nil
}

// readFrom returns the file's content after offset, without proc's own "===" lines.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if !strings.HasPrefix(l, "=== proc: ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
