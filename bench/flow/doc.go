// Command flow measures the operator's flow controls of issue 9 (product.md, "Operating retries";
// invariant 10) on real processes: 3 coordinators on the default timing, -workers retry workers
// (internal/proc), the stub downstream in this process, the real Cassandra.
//
// Rate limit: rows are imported into a readable window as instances whose tokens the program
// picks so that they land in chosen members' ranges. The unequal layout gives the first member one
// instance of -big rows and every member two of -small; the equal layout spreads the same total
// over 5 instances per member. `retryring ctl limit --per-second -limit` is set before the first
// row is written; the stub (5 ms a call) logs when each execution arrived, and the program counts
// them per 1-minute slice from the first one, over -measure, and over sliding minutes, as a
// percentage of the limit (goals: never above 110 %, at least 80 % while rows are pending). Then
// it clears the limit and waits until every row was done. Baseline in the same run: the unequal
// layout with no limit.
//
// Pause: with rows flowing (the stub answers in 50–150 ms), -trials times: wait until an
// execution began within the last 500 ms, then a random phase in [0, renewal), `retryring ctl
// pause` against the leader, hold the pause for renewal + execution timeout + 1 s, read the stub's
// log, `ctl resume`. It reports the time from the call's return (and from its start) to the last
// execution that began anywhere (goal ≤ renewal + execution timeout) and the executions begun
// more than one renewal after the return (invariant 10: 0). At the end every row must have been
// done exactly once.
//
// Each run is a cluster and a keyspace of its own, one after the other; -max-run bounds the whole
// program. It prints markdown: the machine, a table per figure, then the raw values. With
// -compare label=binary the limited rate runs are repeated with another retryring binary, in the
// same run (a change to the worker's throttle against main).
//
//	go run ./bench/flow -limit 50 -measure 4m -trials 12
//	go run ./bench/flow -binary bin/main -compare fix=bin/fix -baseline=false -trials 0
package main
