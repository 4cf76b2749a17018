// Package lease owns the arithmetic of the ring and the rules of a lease: the equal split of the
// Murmur3 token ring [-2^63, 2^63-1] into contiguous ranges, set operations on ranges, the lease a
// worker holds, the timing that says how long a lease may be used, the TimeWindowGuard that the data
// plane calls before every CQL query and every execution, and the JSON wire types that workers and
// coordinators exchange.
//
// It never does I/O and never reads the wall clock: every function that needs time takes a Clock or
// a time.Time, so that tests can drive thousands of histories without sleeping.
//
// A worker uses it like this:
//
//	guard := lease.NewGuard(lease.SystemClock{}, 100*time.Millisecond)
//	guard.Set(l) // l from the coordinator, ValidFrom = when the demand was sent
//	if err := guard.CheckToken(instanceToken, queryTimeout); err != nil {
//		return err // lease.ErrLeaseExpired, ErrLeaseTooShort, ErrTokenNotLeased, ErrNoLease
//	}
//	// run the query, bounded by queryTimeout
package lease
