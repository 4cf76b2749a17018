// Package proctest binds internal/proc's process groups and clusters to a test: a group in a log
// directory of its own that is killed, reaped and, when the test failed, printed (the last lines of
// every log) as the test ends.
//
// It is the only part of the launcher that knows package testing, so the launcher itself stays
// product-grade: `retryring demo` runs internal/proc and links no test code.
package proctest
