// Package rsocketerr turns the error texts of rsocket-go into one readable line.
//
// rsocket-go wraps a failed read once in its connection ("read frame failed:", whose colon the
// wrapper doubles), again in its transport ("read first frame failed") and prints the result with
// the same prefix a third time, so an operator read
// "read first frame failed: read first frame failed: read frame failed:: EOF". Readable keeps each
// piece once and says what the first-frame case means; it never changes a cause (EOF, i/o
// timeout, a TLS alert), which stays at the end of the line.
//
// It only rewrites text: it never parses frames, never logs, and is used where retryring logs
// what rsocket-go reports (the binary's rsocket-go logger, the lease client's lost connections).
//
//	rsocketerr.Readable("read first frame failed: read first frame failed: EOF\n")
//	// "connection closed before its first frame: EOF"
package rsocketerr
