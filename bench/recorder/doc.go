// Command recorder measures figure 1 of docs/benchmarks.md: the cost of recording failures on
// the regular-node write path. N instances (each a recorder.Recorder with its own instance id
// and its own session, as N processes would have) record a number of failures in all, as fast as
// G goroutines per instance can, into W+1 through the normal protocol. Reported: failures
// recorded per second, CQL statements per recorded failure (the recorder's own statement
// counter: every request, page and retry), and the latency of one Record.
//
// The baseline, in the same run and on the same Cassandra: a naive writer that writes all five
// tiers (day, window, instance marker, bucket, failure) for every failure, through the same
// cassandra.Store statements. Runs alternate ours and naive -rounds times, each in its own
// service (ring) of one fresh keyspace, bench_recorder_*, dropped at the end unless -keep.
//
// It must never assert on a timing or touch another keyspace.
//
//	go run ./bench/recorder -instances 10 -count 60000 -goroutines 16 -rounds 2
package main
