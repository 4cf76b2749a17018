// Command flood measures what a crowd of bad clients costs a coordinator cluster with worker
// tokens on (issue 10, item 2): three `retryring coordinator` processes with --worker-tokens,
// --cluster-secret-file and the limits docs/operations.md recommends, two real lease clients
// (worker/leaseclient) holding one ring with a valid token, then two phases of equal length at
// the leader: quiet (the same-run baseline) and flooded (garbage connections and SETUPs without a
// valid token, testkit/flood). Per phase: the longest lapse of the two workers' cover (goal 0),
// the leader's CPU (share of one core) and peak RSS; after the flood, the leader's refusals by
// reason (retryring_coordinator_refusals_total) and what the flood got back.
//
//	go run ./bench/flood -seconds 30 -garbage 500 -setups 200
package main
