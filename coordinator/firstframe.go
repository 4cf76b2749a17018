package coordinator

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/rs/zerolog"
)

// closedBeforeSetupLogger is the limits' closedBeforeSetup hook: one line per connection that
// ended before its SETUP was admitted with no other line to say why, naming the client's address.
// rsocket-go logs the same failures without the address and with its wrappers repeated ("read
// first frame failed: read first frame failed: read frame failed:: EOF"); the binary turns that
// line down to debug. A load balancer's TCP health check is such a connection, hence the burst
// bound.
func (n *Node) closedBeforeSetupLogger() func(remote string, r refusal, readErr error) {
	log := n.partLog("rsocket").Sample(&zerolog.BurstSampler{Burst: refusalLogBurst, Period: time.Second})
	return func(remote string, r refusal, readErr error) {
		why, ok := n.closedBeforeSetupReason(r, readErr)
		if !ok {
			return
		}
		log.Info().Str("remote", remote).Str("reason", r.String()).
			Msgf("rsocket: connection from %s closed %s", remote, why)
	}
}

// closedBeforeSetupReason says why a connection ended before its SETUP was admitted; false when
// this side closed it with no failed read of the client's.
func (n *Node) closedBeforeSetupReason(r refusal, readErr error) (string, bool) {
	switch {
	case r == refusedSetupTimeout:
		return fmt.Sprintf("with no SETUP admitted within %v", n.cfg.SetupTimeout), true
	case r == refusedSetupTooLarge:
		return fmt.Sprintf("after sending more than %d KiB before its SETUP", maxSetupBytes>>10), true
	case readErr == nil, errors.Is(readErr, net.ErrClosed):
		// This side closed it: rsocket-go after a first frame it could not use (its own line
		// says which), the TLS layer after a failed handshake (logged), or the node stopping.
		return "", false
	case errors.Is(readErr, io.EOF):
		return "before its first frame: EOF (the client hung up)", true
	case errors.Is(readErr, os.ErrDeadlineExceeded):
		return fmt.Sprintf("before its first frame: nothing received for %v (the silence timeout)", n.cfg.SilenceTimeout), true
	default:
		return "before its first frame: " + readErr.Error(), true
	}
}
