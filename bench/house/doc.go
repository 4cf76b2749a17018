// Command house prints the figures issue 18 ("a house a new engineer can find their way in") asks
// for, for the checkout it runs in or the one -dir names, so that a before and an after come from
// the same command:
//
//   - lines of Go (without _test.go files) in the product and in the harness (testkit/, bench/,
//     e2e/, conformance/, docs/, deploy/: testkit/layers' list), and of test files;
//   - how many times `go list -deps ./cmd/retryring` lists package testing (goal 0; hashicorp/raft
//     links it, see testkit/layers);
//   - methods on the coordinator's Node and on its leaderTerm, in non-test files (a go/ast count;
//     a type that does not exist counts 0);
//   - the longest product function (lines from func to closing brace);
//   - the worker package's tests, and how many of them need Cassandra: a Test function that
//     calls, directly or through the package's own test helpers, a package whose name ends in
//     storetest or cassandratest (testkit/ today, internal/ before the test kit).
//
// The layer rule (no import up the table of docs/architecture.md) is a test, testkit/layers, not
// a figure.
//
//	go run ./bench/house                  # this checkout
//	git worktree add /tmp/before 70c1d4d && go run ./bench/house -dir /tmp/before
package main
