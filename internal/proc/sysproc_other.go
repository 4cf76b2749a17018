//go:build unix && !linux

package proc

import (
	"syscall"
	"time"
)

// sysProcAttr puts the child in a process group of its own. Without Pdeathsig outside Linux, a
// test binary killed by SIGKILL leaves its children behind; Group's cleanup covers every other
// way out.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped cannot see the state of a process outside Linux; the stop is assumed.
func waitStopped(int, time.Duration) error { return nil }
