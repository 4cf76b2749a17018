// Command replay measures `retryring deadletters replay` (package deadletter): it writes N dead
// letters of N steps straight into es_dead_letters (with the floor and marker a worker leaves),
// replays them at -rate per second through the recorder's write path, then drains the replayed
// copies with in-process workers holding static leases and a downstream that counts calls per
// idempotency key. It prints the replay's duration and achieved rate, the statements the replay
// tried again after a transient failure (a busy Cassandra's timeouts) and the marks it settled by
// a serial read, whether it stopped (goal: never), the time until every replayed step was
// executed, and how many steps were executed other than exactly once (goal 0). It exits 1 when a
// replay stopped.
// With -baseline-rate it first does the same with an unpaced replay (rate 0) on a keyspace of its
// own, in the same run.
//
//	go run ./bench/replay -dead 10000 -rate 500 -baseline-rate
package main
