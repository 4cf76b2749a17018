package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	rslogger "github.com/rsocket/rsocket-go/logger"
	"github.com/spf13/pflag"

	"github.com/retryring/retryring/internal/rsocketerr"
)

// logFlags choose the log level and format of a long-running subcommand.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", "json", "log format: json, or console for people")
}

func (l *logFlags) logger(w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(l.level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", l.level, err)
	}
	switch l.format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want json or console", l.format)
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

var stderr io.Writer = os.Stderr

// rsocketLogger sends rsocket-go's package-level logs (which go to stdout by default) into
// zerolog, one level down and on one readable line each (rsocketerr.Readable): rsocket-go reports
// a worker that went away as an error, which for a coordinator is routine and is logged by our own
// code with context. A connection that ended before its first frame is such a case: the
// coordinator logs it with the client's address, so rsocket-go's line, which has none, is debug.
type rsocketLogger struct{ log zerolog.Logger }

func (l rsocketLogger) Debugf(format string, args ...any) { l.line(zerolog.TraceLevel, format, args) }
func (l rsocketLogger) Infof(format string, args ...any)  { l.line(zerolog.DebugLevel, format, args) }
func (l rsocketLogger) Warnf(format string, args ...any)  { l.line(zerolog.DebugLevel, format, args) }
func (l rsocketLogger) Errorf(format string, args ...any) { l.line(zerolog.InfoLevel, format, args) }

func (l rsocketLogger) line(level zerolog.Level, format string, args []any) {
	msg := rsocketerr.Readable(fmt.Sprintf(format, args...))
	if strings.HasPrefix(msg, rsocketerr.BeforeFirstFrame) {
		level = zerolog.DebugLevel
	}
	l.log.WithLevel(level).Msg(msg)
}

// routeRSocketLogs installs log as rsocket-go's logger.
func routeRSocketLogs(log zerolog.Logger) {
	rslogger.SetLogger(rsocketLogger{log: log.With().Str("component", "rsocket-go").Logger()})
}

// gocqlLinesPerMinute bounds the driver lines a worker logs: gocql writes one at every attempt to
// reconnect (about every second while Cassandra is down), and the worker says what matters itself
// (Cassandra lost, still failing once a minute, reachable again).
const gocqlLinesPerMinute = 5

// gocqlLogger sends gocql's lines into zerolog, on one line each, at most gocqlLinesPerMinute a
// minute.
type gocqlLogger struct{ log zerolog.Logger }

func newGocqlLogger(log zerolog.Logger) gocqlLogger {
	return gocqlLogger{log: log.With().Str("component", "gocql").Logger().
		Sample(&zerolog.BurstSampler{Burst: gocqlLinesPerMinute, Period: time.Minute})}
}

func (l gocqlLogger) Print(v ...any) { l.line(fmt.Sprint(v...)) }

func (l gocqlLogger) Printf(format string, v ...any) { l.line(fmt.Sprintf(format, v...)) }

func (l gocqlLogger) Println(v ...any) { l.line(fmt.Sprintln(v...)) }

func (l gocqlLogger) line(s string) { l.log.Info().Msg(strings.Join(strings.Fields(s), " ")) }
