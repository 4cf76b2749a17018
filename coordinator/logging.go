package coordinator

import (
	"bytes"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// partLog is the logger of one part of the node (the node itself, the FSM, Raft, the leader, a
// worker connection, a lease stream). Every part derives its logger from the node's, never from
// another part's, so that a line names its component once: JSON with a repeated key is refused
// by some log pipelines.
func (n *Node) partLog(component string) zerolog.Logger {
	return n.nodeLog.With().Str("component", component).Logger()
}

// hclogFor gives hashicorp/raft an hclog.Logger that writes through zerolog, so that the whole
// node logs one way. hclog formats the line; its level tag picks the zerolog level.
func hclogFor(log zerolog.Logger, name string) hclog.Logger {
	level := hclog.Off
	switch l := log.GetLevel(); {
	case l == zerolog.Disabled:
	case l <= zerolog.DebugLevel:
		level = hclog.Debug
	case l == zerolog.InfoLevel:
		level = hclog.Info
	case l == zerolog.WarnLevel:
		level = hclog.Warn
	default:
		level = hclog.Error
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       level,
		Output:      hclogWriter{log: log},
		DisableTime: true,
	})
}

type hclogWriter struct{ log zerolog.Logger }

func (w hclogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	ev := w.log.Info()
	switch {
	case bytes.HasPrefix(line, []byte("[ERROR]")):
		ev = w.log.Error()
	case bytes.HasPrefix(line, []byte("[WARN]")):
		ev = w.log.Warn()
	case bytes.HasPrefix(line, []byte("[DEBUG]")), bytes.HasPrefix(line, []byte("[TRACE]")):
		ev = w.log.Debug()
	}
	ev.Msg(string(line))
	return len(p), nil
}
