package proc

import "errors"

var (
	// ErrRunning means the process is running and the call needs it stopped (Restart).
	ErrRunning = errors.New("proc: process is running")
	// ErrNotRunning means the process has exited (or was never launched) and the call needs it
	// running (Stop, Cont, Term, a wait for readiness).
	ErrNotRunning = errors.New("proc: process is not running")
	// ErrTermTimeout means a process did not exit within the bound after SIGTERM and was killed.
	ErrTermTimeout = errors.New("proc: process ignored SIGTERM and was killed")
	// ErrPortInUse means a child could not bind a port handed to it (another process took it
	// between FreePort and the child's listen).
	ErrPortInUse = errors.New("proc: a port given to the process was taken by another")
	// ErrNoLeader means no coordinator reported itself as the leader within the bound.
	ErrNoLeader = errors.New("proc: no coordinator leader")
)
