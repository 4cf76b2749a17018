// Package clocktest is the clock the tests inject wherever production code takes a lease.Clock:
// it moves only when the test says so, so that histories of leases, windows and retries are
// generated exactly, without sleeps and without depending on a loaded machine's timing.
package clocktest
