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

// holdingDelay is the delay before the retry-th retry (from 1) while a usable lease is held; the
// first one after an element goes at once (dialPlan). Its mean is Holding, doubled for each retry
// after the first and capped at holdingCeiling × Holding; it is drawn uniformly from
// [mean/2, 3·mean/2).
//
// Short at first, because the worker has only what is left of its lease to find the new leader:
// the first round through a list of three addresses takes about 200 ms. Then slower, because a
// fleet that retries every 100 ms for a whole lease is a storm of its own: measured with 1,000
// lease clients on one 2-core machine (bench/swarm), ten attempts a second per worker kept the
// coordinators so busy that Raft missed heartbeats and the leadership moved again and again. The
// cap keeps a worker at about one attempt a second for the rest of its lease, which still reaches
// a new leader within a second of its election. Jittered, so that workers cut off together do not
// retry together.
func (b Backoff) holdingDelay(retry int, r float64) time.Duration {
	mean := b.Holding
	for i := 1; i < retry && mean < holdingCeiling*b.Holding; i++ {
		mean *= 2
	}
	mean = min(mean, holdingCeiling*b.Holding)
	return mean/2 + time.Duration(r*float64(mean))
}

// holdingCeiling caps the mean delay between retries while a usable lease is held, in units of
// Backoff.Holding: 1 s with the default 100 ms.
const holdingCeiling = 10

// configDelay is the delay after an error a retry will not fix soon (bad_setup,
// duplicate_connection, unauthorized): the maximum, jittered to [Max/2, Max), whatever the lease,
// so that a misconfigured fleet does not hammer the coordinators.
func (b Backoff) configDelay(r float64) time.Duration {
	return b.Max/2 + time.Duration(r*float64(b.Max-b.Max/2))
}
