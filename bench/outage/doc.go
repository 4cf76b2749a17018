// Command outage measures what the downstream sees while it is down, the hour retryring exists
// for (issue 9's outage figure): N failures pending (a backdated import, readable at once), the
// downstream answering 503 to everything for -outage, -workers retry workers as real processes
// behind a 3-node coordinator cluster, one worker SIGSTOPped for a few seconds and the coordinator
// leader killed (kill -9) mid-outage. It reports the calls made during the outage, the calls that
// repeated an attempt already answered 503 (goal 0), the calls sooner than the backoff allows
// (goal 0), the most calls one step received, and the time from the recovery until every step was
// done. Each -variant is a run of its own, same binary, same machine, one after the other; a
// variant is a name and worker flags, e.g. "breaker=" (the default worker) and
// "no-breaker=--no-breaker".
//
// To explain a repeated attempt, it records the run's faults (the SIGSTOP's start and end, the
// leader kill until a leader is known again, any worker that exits by itself) and prints, per
// repeat, both calls (worker, lease epoch, window, attempt, times since the outage began, answer),
// the fault nearest the end of the first call, the count of repeats per fault, and the workers' log
// lines naming its transaction; and, per worker, the settling writes it had to try again.
// -drain-wait bounds the wait after the recovery (a diagnostic run need not drain), -keep-logs keeps
// the processes' logs, -log-level sets theirs.
//
//	go run ./bench/outage -count 20000 -outage 5m -variant breaker= -variant no-breaker=--no-breaker
package main
