// Command rangescan measures what a lease of several ranges costs the worker's scan of a window
// (issue 19, item 3): the worker lists a window's instances with one tier-3 query per leased range
// (worker/traverse.go, scanWindow), so a lease of k ranges costs k queries per window where the
// contiguous split's lease costs one. The minimal movement mode holds a worker to at most
// max_ranges ranges (16 by default; a settled ring merges down to 8).
//
// It writes one window's instance markers (-instances) into a keyspace of its own on the test
// Cassandra, then lists the instances of the same share of the ring (-share) split into k ranges
// spread around the ring, for each k of -k, as the worker does: the queries one after the other.
// The k are taken in a new random order each round (-rounds), so the machine's noise falls on all
// of them alike; k = 1 is the baseline of the same run. It reports, per k, the median and p90 time
// of one window's listing, the queries, the instances found, and the cost of each extra query.
//
//	go run ./bench/rangescan                              # k = 1,2,4,8,16,32; 300 instances; share 1/3
//	go run ./bench/rangescan -instances 3000 -rounds 50
package main
