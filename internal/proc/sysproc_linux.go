package proc

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// sysProcAttr puts the child in a process group of its own (so that signals reach anything it
// starts, and a terminal's Ctrl-C meant for the test does not reach it twice) and has the kernel
// SIGKILL it when the launching thread dies. Go does not end the threads it runs goroutines on
// (only a goroutine that exits while locked to its thread ends that thread, and this package
// never locks one), so in practice that is when the test binary exits, however it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of pid is in the stopped state: kill(SIGSTOP) returns
// when the signal is queued, and a thread running on another core goes on for a moment. A test
// that takes the instant of a freeze must take it after the freeze.
func waitStopped(pid int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		stopped, err := allStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proc: pid %d not stopped %v after SIGSTOP", pid, bound)
		}
		time.Sleep(time.Millisecond)
	}
}

func allStopped(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		st, ok := statState(b)
		if !ok {
			return false, fmt.Errorf("proc: unreadable /proc/%d/task/%s/stat", pid, task.Name())
		}
		if st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}
