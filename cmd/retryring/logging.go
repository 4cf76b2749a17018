package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
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
