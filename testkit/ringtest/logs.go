package ringtest

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	rslogger "github.com/rsocket/rsocket-go/logger"
)

// logBuffer keeps the last lines the components logged, to print them when a test fails: logging
// to the test as it happens would drown a passing run and cost time on a small machine.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLogBuffer(n int) *logBuffer { return &logBuffer{lines: make([]string, n)} }

// Write implements io.Writer; zerolog writes one event per call.
func (b *logBuffer) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\n"))
	b.mu.Lock()
	b.lines[b.next] = line
	b.next++
	if b.next == len(b.lines) {
		b.next, b.full = 0, true
	}
	b.mu.Unlock()
	return len(p), nil
}

// String returns the kept lines, oldest first.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	if b.full {
		out = append(out, b.lines[b.next:]...)
	}
	out = append(out, b.lines[:b.next]...)
	return strings.Join(out, "\n")
}

// logLevel is RINGTEST_LOG when it names a level, else def when it does, else Info.
func logLevel(def string) zerolog.Level {
	for _, name := range []string{os.Getenv("RINGTEST_LOG"), def} {
		if name == "" {
			continue
		}
		if l, err := zerolog.ParseLevel(name); err == nil {
			return l
		}
	}
	return zerolog.InfoLevel
}

// waitClosed waits for ch to close, at most timeout.
func waitClosed(ch <-chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// rsocket-go logs through one process-wide logger, printing to stderr by default. The harness sends
// those lines to the most recent cluster's log buffer instead: its tests run one cluster at a time.
var (
	rsocketLogOnce sync.Once
	rsocketLogTo   atomic.Pointer[zerolog.Logger]
)

// routeRSocketLogs makes rsocket-go log into l from now on.
func routeRSocketLogs(l zerolog.Logger) {
	l = l.With().Str("component", "rsocket").Logger()
	rsocketLogTo.Store(&l)
	rsocketLogOnce.Do(func() { rslogger.SetLogger(rsocketLogger{}) })
}

type rsocketLogger struct{}

func (rsocketLogger) log(level zerolog.Level, format string, args []any) {
	if l := rsocketLogTo.Load(); l != nil {
		l.WithLevel(level).Msgf(strings.TrimSpace(format), args...)
	}
}

func (r rsocketLogger) Debugf(format string, args ...any) { r.log(zerolog.DebugLevel, format, args) }
func (r rsocketLogger) Infof(format string, args ...any)  { r.log(zerolog.InfoLevel, format, args) }
func (r rsocketLogger) Warnf(format string, args ...any)  { r.log(zerolog.WarnLevel, format, args) }
func (r rsocketLogger) Errorf(format string, args ...any) { r.log(zerolog.ErrorLevel, format, args) }
