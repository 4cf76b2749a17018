// Package window owns the time arithmetic of the retry directory: UTC calendar days, the
// fixed-length windows a day is cut into, the W+1 rule that tells a writer where to write,
// and the clock gates that tell a reader when a window may be read and Node-0 when a window
// or a day may be deleted.
//
// A window of length L minutes (L divides 1440) is named by its UTC day and its first
// minute: minute_of_day = floor(m / L) × L. Windows roll over midnight, month ends, New Year
// and leap days by plain calendar arithmetic on the UTC day.
//
// It never does I/O and never reads the wall clock: every function that needs the time takes
// it as an argument, so that writers, workers and tests share one definition of "now".
//
//	w, err := window.WriteTarget(now, 5)               // where a regular node writes: W+1
//	if window.Readable(w, now, 2*time.Second) { ... }  // may a worker read it yet?
//	if window.DeletableWindow(w, now, 2*time.Second) { ... } // Node-0's time gate
package window
