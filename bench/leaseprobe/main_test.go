package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestTheTapLearnsConnectionsAndFiltersByLevel(t *testing.T) {
	var out bytes.Buffer
	var addrs []string
	tap := &logTap{out: &out, min: zerolog.WarnLevel, onConnect: func(a string) { addrs = append(addrs, a) }}
	log := zerolog.New(tap).Level(zerolog.DebugLevel)
	log.Debug().Str("coordinator_addr", "127.0.0.1:1").Msg(connectedMsg)
	log.Info().Str("coordinator_addr", "127.0.0.1:2").Msg("following not_leader to the leader")
	log.Warn().Str("coordinator_addr", "127.0.0.1:3").Msg("lease stream ended, reconnecting")
	if len(addrs) != 1 || addrs[0] != "127.0.0.1:1" {
		t.Fatalf("connections %v", addrs)
	}
	if got := strings.Count(out.String(), "\n"); got != 1 || !strings.Contains(out.String(), "reconnecting") {
		t.Fatalf("copied to stderr: %q", out.String())
	}
}
