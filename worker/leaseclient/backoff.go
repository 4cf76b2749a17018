package leaseclient

import (
	"time"

	"github.com/retryring/retryring/lease"
)

// delay is the full-jitter backoff before attempt (0-based): r×min(Max, Min·2^attempt), where r is
// a uniform draw from [0, 1). Pure, so that its bounds are tested without sleeping.
func (b Backoff) delay(attempt int, r float64) time.Duration {
	ceiling := b.Max
	if attempt < 62 {
		if d := b.Min << attempt; d > 0 && d < b.Max && d>>attempt == b.Min {
			ceiling = d
		}
	}
	return time.Duration(r * float64(ceiling))
}

// delayHolding is delay capped at Holding: the delay while a usable lease is still held.
func (b Backoff) delayHolding(attempt int, r float64) time.Duration {
	ceiling := b.Holding
	if d := b.delay(attempt, 1); d < ceiling {
		ceiling = d
	}
	return time.Duration(r * float64(ceiling))
}

// reconnectDelay is the delay before reconnect attempt (0-based) at now, given the last lease the
// client held (held false: none yet). While that lease is usable, and for one TTL after it ran
// out, the delay stays capped at Holding: a worker whose lease lapsed during a leader election
// wants it back the moment the new leader answers, and a doubling delay grown over the election's
// failed attempts (3.2 s after five) would leave its ranges idle long after that (a 4 s gap in a
// chaos run). Past that, a worker that has had no lease for a while (quorum lost, coordinators
// down) backs off fully and spares the coordinators.
func (b Backoff) reconnectDelay(attempt int, r float64, last lease.Lease, held bool, now time.Time) time.Duration {
	if held && now.Before(last.ExpiresAt().Add(last.TTL)) {
		return b.delayHolding(attempt, r)
	}
	return b.delay(attempt, r)
}
