//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package coordinator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLockFile is the lock file in the data directory; it holds the holder's pid.
const dataDirLockFile = "lock"

// lockDataDir takes an exclusive flock on DataDir/lock and writes this process's pid into it, so
// that a second coordinator on the same data directory is refused at once, naming the holder
// (before, it waited on raft.db's own lock and said only "open raft log: timeout"). The kernel
// drops a flock with its process, so a crashed holder leaves no stale lock behind; the file
// itself stays, with the last holder's pid in it.
func lockDataDir(dir string) (release func() error, err error) {
	path := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("coordinator: data dir %s: lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, dataDirInUse{dir: dir, holder: holderName(holder)}
		}
		return nil, fmt.Errorf("coordinator: data dir %s: lock %s: %w", dir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("coordinator: data dir %s: write lock file: %w", dir, err)
	}
	return f.Close, nil // closing the file drops the lock
}

func holderName(content []byte) string {
	pid := strings.TrimSpace(string(content))
	if _, err := strconv.Atoi(pid); err != nil {
		return "another process (its pid is not written yet)"
	}
	return "pid " + pid
}
