// Package executor holds the retry worker's stock Executor: HTTP, which POSTs each task as JSON
// to a configured URL (the binary's --executor-url) and classifies the answer by the step's retry
// policy (HTTPConfig.Policies, package retrypolicy).
//
// The body names the step and is the same for every attempt of it; the header Idempotency-Key is
// <transaction_id>:<impl_type> (plus :r<replay> after a dead-letter replay), one key per step;
// what changes per attempt travels in headers: Retry-Attempt (1 for the first retry),
// Retryring-Worker, Retryring-Lease-Epoch and Retryring-Window (<date>/<minute_of_day>). A
// request the fence refused never reached the downstream: worker.NotSent, which uses no attempt.
//
// The built-in classification:
//
//   - 2xx or 409 Conflict (the step already happened): worker.Done;
//   - 5xx, 408, 425, 429, a timeout, a refused or broken connection: worker.Transient;
//   - any other 4xx: worker.Permanent.
//
// A status outside these (1xx, a 3xx that was not followed) is treated as Transient: the retry
// budget dead-letters it eventually, and a misrouted URL fixed meanwhile loses nothing. A
// transient 429 or 503 with a valid Retry-After reports it in Outcome.RetryAfter; an invalid one
// is ignored.
//
// It never retries by itself (the worker decides what a transient failure becomes) and never
// reads or writes Cassandra.
//
// Its connections are fenced (fence.go): a request whose context deadline — which the worker sets
// inside the lease the execution runs under — has passed by the time it is written is not sent
// (ErrFenced), so a worker paused after its guard's check does not call the downstream on a lease
// that may have ended.
//
//	ex, err := executor.NewHTTP(executor.HTTPConfig{URL: "http://orders:8080/retry"})
//	w, err := worker.New(cfg, store, guard, ex)
package executor
