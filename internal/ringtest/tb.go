package ringtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// TB is what the harness needs from its caller. *testing.T and *testing.B satisfy it; a benchmark
// program outside `go test` can use Standalone.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	TempDir() string
}

var _ TB = testing.TB(nil)

// Errors of Run.
var (
	// ErrFatal is the panic value of Standalone.Fatalf, the program's equivalent of a failed test
	// stopping at once; Run recovers it and returns it.
	ErrFatal = errors.New("ringtest: fatal")
	// ErrFailed means Errorf was called during Run: a check failed but the run went on.
	ErrFailed = errors.New("ringtest: run failed")
)

// Standalone is a TB for programs (a benchmark driver): logs go to a writer, Fatalf panics with
// ErrFatal, and Close runs the cleanups in reverse order and removes the temporary directories.
type Standalone struct {
	out io.Writer

	mu       sync.Mutex
	failed   bool
	cleanups []func()
	dirs     []string
}

// NewStandalone returns a Standalone logging to out (os.Stderr when nil).
func NewStandalone(out io.Writer) *Standalone {
	if out == nil {
		out = os.Stderr
	}
	return &Standalone{out: out}
}

// Helper does nothing: there are no test frames to hide.
func (s *Standalone) Helper() {}

// Logf writes a line.
func (s *Standalone) Logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, format+"\n", args...)
}

// Errorf writes a line and marks the run failed.
func (s *Standalone) Errorf(format string, args ...any) {
	s.Logf(format, args...)
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

// Fatalf is Errorf, then a panic with ErrFatal.
func (s *Standalone) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	panic(ErrFatal)
}

// Failed reports whether Errorf or Fatalf was called.
func (s *Standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Cleanup registers f to run at Close, the last registered first.
func (s *Standalone) Cleanup(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

// TempDir makes a directory that Close removes.
func (s *Standalone) TempDir() string {
	dir, err := os.MkdirTemp("", "ringtest-")
	if err != nil {
		s.Fatalf("ringtest: temp dir: %v", err)
	}
	s.mu.Lock()
	s.dirs = append(s.dirs, dir)
	s.mu.Unlock()
	return dir
}

// Close runs the cleanups and removes the temporary directories.
func (s *Standalone) Close() {
	s.mu.Lock()
	cleanups, dirs := s.cleanups, s.dirs
	s.cleanups, s.dirs = nil, nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Run calls f with a fresh Standalone and closes it afterwards, turning a Fatalf into an error.
func Run(out io.Writer, f func(tb *Standalone)) (err error) {
	s := NewStandalone(out)
	defer s.Close()
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); !ok || !errors.Is(e, ErrFatal) {
				panic(r)
			}
			err = ErrFatal
		}
		if err == nil && s.Failed() {
			err = ErrFailed
		}
	}()
	f(s)
	return nil
}
