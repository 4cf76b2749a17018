// Package downstream is the stub downstream service of the end-to-end tests and the demo: an
// HTTP server on a loopback port that implements the executor contract of docs/product.md
// ("Executor": a JSON POST per retried step with the header Idempotency-Key: <transaction_id>)
// and remembers every execution it saw.
//
// What it owns:
//   - the record of every execution: transaction, instance, worker, lease epoch, attempt, the
//     answer it gave, and when the request arrived and when the answer left (time.Time values
//     with their monotonic reading, so they compare exactly with other instants taken in the
//     same process, such as the moment a test sent SIGSTOP);
//   - configurable behaviour: 503 for the first part of a run or while a switch is on, a
//     permanent 4xx for a deterministic fraction of transaction ids (or named ones), and latency;
//   - what a phase of a demo or a test waits for, so that none ends before the work it is about
//     began: the calls refused so far and when the first came (Refusals), and the next call held
//     under way until released (HoldNext), to kill its worker at that very moment;
//   - the analyses a test asserts on (analysis.go): transactions executed twice (with the
//     workers and times), instances executed by two workers at overlapping times, an instance
//     that went back to a worker under a lease epoch it had already used before another worker
//     took it over (a stale lease), and requests that broke the contract.
//
// An execution "is done" when the stub answered 2xx or 409 (what the worker treats as done). A
// request the worker gave up on while the stub was still working (its connection closed during
// the latency) is recorded as aborted: the stub applies no effect for it, so it never counts as
// done, but it still occupied its instance for that time and is part of the overlap check.
//
// A repeated execution of a transaction that was already done is answered 409 Conflict, as a
// downstream that honours the idempotency key would, and is counted as executed twice.
//
// What it must never do: listen on anything but loopback, decide anything for the worker (it
// only answers), or forget an execution (the record only grows; Reset is for a new phase of a
// demo, never called by the tests' checks).
//
// Usage:
//
//	ds, err := downstream.Start(downstream.Config{UnavailableFor: 20 * time.Second, Latency: 20 * time.Millisecond})
//	defer ds.Close()
//	// worker: --executor-url ds.URL()
//	dups := ds.Duplicates()       // transactions done twice, with who and when
//	bad := ds.Interleavings()     // must be empty
//	s := ds.Summary()
package downstream
