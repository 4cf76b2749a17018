package main

import (
	"time"
)

// How the worker retries what it needs before it can work (Cassandra's session and schema, the
// check of its coordinator credentials): capped exponential backoff with jitter. Retry n (0-based)
// waits a uniform draw from [c/2, c), c = min(depRetryMax, depRetryMin × 2^n): 0.25–0.5 s, then
// 0.5–1 s, ... up to 15–30 s from the seventh retry on. The jitter keeps a fleet of workers that
// lost Cassandra together from coming back together; the half that is not drawn keeps each
// worker from retrying back to back.
const (
	depRetryMin = 500 * time.Millisecond
	depRetryMax = 30 * time.Second
)

// retryDelay is the wait before retry n (0-based) for a uniform draw in [0, 1).
func retryDelay(n int, draw float64) time.Duration {
	ceiling := depRetryMax
	if n < 16 { // 0.5 s × 2^6 is past the cap already; the bound keeps the shift from overflowing
		ceiling = min(depRetryMax, depRetryMin<<n)
	}
	return ceiling/2 + time.Duration(draw*float64(ceiling/2))
}

// stillFailingEvery spaces the log lines of a failure that goes on with the same cause: the first
// failure is logged, and so is each change of cause, but a dependency down for an hour is one line
// a minute, not one per attempt.
const stillFailingEvery = time.Minute

// failureLog decides which attempts of a retried dependency are worth a log line. Not safe for
// concurrent use: one loop owns it.
type failureLog struct {
	since      time.Time // the first failure of the current run of failures; zero when none
	failures   int       // failures since then
	cause      string    // the last failure's cause
	lastLogged time.Time
}

// failureLine is what failed says to log.
type failureLine int

const (
	lineNone     failureLine = iota
	lineFirst                // the first failure after a success (or at start)
	lineChanged              // the cause differs from the last logged one
	lineStillBad             // the same cause, stillFailingEvery after the last line
)

// failed records a failure at now with cause and says which line, if any, to log.
func (f *failureLog) failed(now time.Time, cause string) failureLine {
	f.failures++
	switch {
	case f.since.IsZero():
		f.since, f.cause, f.lastLogged = now, cause, now
		return lineFirst
	case cause != f.cause:
		f.cause, f.lastLogged = cause, now
		return lineChanged
	case now.Sub(f.lastLogged) >= stillFailingEvery:
		f.lastLogged = now
		return lineStillBad
	}
	return lineNone
}

// recovered records a success at now. It returns how many failures came before it and for how
// long they lasted (0 and 0 when there were none: nothing to log).
func (f *failureLog) recovered(now time.Time) (failures int, lasted time.Duration) {
	if f.since.IsZero() {
		return 0, 0
	}
	failures, lasted = f.failures, now.Sub(f.since)
	*f = failureLog{}
	return failures, lasted
}
