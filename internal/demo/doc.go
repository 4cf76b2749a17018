// Package demo is `retryring demo`: the main job of retryring, on one machine, in one command.
//
// A run:
//  1. finds a Cassandra that answers (and, when none does on a loopback address and
//     scripts/cassandra.sh is nearby, starts one with it), and applies the schema to a fresh
//     keyspace, demo_<UTC date>_<time>, dropped at the end unless Keep;
//  2. starts the stub downstream (internal/downstream) answering 503, three coordinators and three
//     workers as processes of the same binary (a proc.Cluster, as the end-to-end tests start
//     theirs), and waits until the workers' leases cover the ring;
//  3. records a burst of failures (20,000 across 10 instances by default) in this process, as
//     the regular services would, through the recorder's W+1 path;
//  4. shows live progress about once a second: per window recorded, pending, done, retried and
//     dead-lettered; a progress bar of the drain; which worker holds which tokens; the leader and
//     its ring page (GET /, HTML; the same view as JSON at GET /v1/ring). On a terminal the frame is redrawn in place with events
//     printed above it; otherwise each frame is one plain line;
//  5. once the first window opened, each phase waiting for the work it is about, never for a
//     time alone (a slow machine, a kill or an election can keep the workers away for long): lets
//     the downstream recover once it has refused some calls and Duration503 has passed since the
//     first refusal; kills a worker with SIGKILL at the moment it has a call under way at the
//     downstream, and launches it again; once it is back, kills the coordinator leader with
//     SIGKILL and launches it again later; once both are back, pauses the ring at a call under
//     way after the recovery; printing each event;
//  6. ends when every recorded transaction is done (the stub answered 2xx or 409) or
//     dead-lettered (es_dead_letters), and prints the summary: recorded, done, dead-lettered,
//     lost, executed twice (explained), interleavings, time to drain, and what is left in the
//     directory. Run returns ErrLost when something was lost, so the command exits non-zero.
//
// Why the W+1 path and not --backdate: the demo shows what a regular service does, and a
// transient failure is recorded again one window ahead under the same W+1 rule, so waiting for
// real minutes is part of the story anyway; backdating would save only the wait for the first
// window (30 s on average with 1-minute windows). Backdate is there for quick runs and the test.
//
// Where each count comes from, so that none is taken on trust:
//   - recorded: the burst's own transaction ids (per window: those ids, plus the copies workers
//     recorded again, read from the directory before their window opened, plus anything the
//     downstream saw executed from the window);
//   - done and executed twice: the downstream stub's record of every execution;
//   - dead-lettered: es_dead_letters;
//   - lost = recorded − done − dead-lettered, by transaction id;
//   - pending, per window, = recorded − done − retried − dead-lettered.
//
// What it must never do:
//   - leave a process behind: children run in process groups of their own and get SIGKILL
//     when this process dies (internal/proc); Ctrl-C stops them gracefully (workers leave the
//     ring, then the coordinators stop), a second Ctrl-C kills them at once;
//   - write to the retry directory other than as a regular service (the recorder) would: the
//     progress reads it with the Store's queries and never deletes;
//   - touch a keyspace it did not create: an existing keyspace of the chosen name is refused;
//   - decide anything for the workers or coordinators: it only starts, kills and watches them.
//
// One concern a file: run.go sets the run up and tears it down (Cassandra, keyspace, logs,
// signals); fleet.go is the processes (started, watched for the leader, stopped); burst.go
// records the burst, live or backdated; faults.go kills a worker and the leader, each as one
// kill → observe → restart; progress.go is the loop, its progress and the frames and summary it
// builds; inspect.go reads the directory, account.go counts, render.go and summary.go write.
package demo
