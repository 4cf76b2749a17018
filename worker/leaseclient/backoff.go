package leaseclient

import (
	"time"
)

// delay is the full-jitter backoff before attempt (0-based) while no usable lease is held:
// r×min(Max, Min·2^attempt), where r is a uniform draw from [0, 1). Pure, so that its bounds are
// tested without sleeping.
func (b Backoff) delay(attempt int, r float64) time.Duration {
	ceiling := b.Max
	if attempt < 62 {
		if d := b.Min << attempt; d > 0 && d < b.Max && d>>attempt == b.Min {
			ceiling = d
		}
	}
	return time.Duration(r * float64(ceiling))
}

// holdingDelay is the delay before a retry while a usable lease is held, but for the first one
// after an element, which goes at once (dialPlan): a uniform draw from [Holding/2, 3·Holding/2).
// Short, because the worker has only what is left of its lease to find the new leader; jittered,
// so that workers cut off together do not retry together.
func (b Backoff) holdingDelay(r float64) time.Duration {
	return b.Holding/2 + time.Duration(r*float64(b.Holding))
}

// configDelay is the delay after an error a retry will not fix soon (bad_setup,
// duplicate_connection, unauthorized): the maximum, jittered to [Max/2, Max), whatever the lease,
// so that a misconfigured fleet does not hammer the coordinators.
func (b Backoff) configDelay(r float64) time.Duration {
	return b.Max/2 + time.Duration(r*float64(b.Max-b.Max/2))
}
