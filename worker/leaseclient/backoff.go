package leaseclient

import "time"

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
