// Package deadletter is what an operator does with the failures retryring gave up on: list them,
// show one, replay them, purge them (`retryring deadletters list|show|replay|purge`).
//
// It owns the replay protocol (product.md, "Dead letters"). A replay run has an id; its first
// start is recorded (es_dead_letter_replays) and is the snapshot bound of the run: only dead
// letters given up on before it, and not replayed yet, are replayed, so what fails again during
// the run is not replayed again, and running the same id again replays nothing new (and completes
// a run that stopped on an error). Each dead letter of a step at replay generation g is replayed
// by, in this order:
//
//  1. recording the step again through the recorder's write path (W+1, or the late protocol where
//     its clock calls for it), under its own instance id, at generation g+1, attempt 0;
//  2. raising the step's marker floor to (g+1, 0), so that no older copy of the step is ever
//     executed again (a dead letter written by this release left it there already; one written
//     before floors existed did not);
//  3. marking the dead letter replayed (its id and time), on the row it was read from only (a
//     compare-and-set on its dead_at): a dead letter purged meanwhile is not brought back, and
//     one the step's next dead letter was written over is not marked for it. Such a dead letter
//     is reported (copied_unmarked) and not tried again. It stays until purged.
//
// Before 1, the step's marker is read: COMMITTED means nothing is left to retry (already_done),
// even under a DEAD_LETTERED written after it (a duplicate copy of the step given up on after
// another copy succeeded);
// a floor past (g+1, 0) means a newer copy of the step exists already (an earlier replay whose
// mark was lost, and whose copy ran since), so the copy would be finished at once without a call:
// nothing is written and the dead letter is reported superseded, in a dry run too.
//
// A busy Cassandra does not stop a run: a statement that fails transiently (cassandra.Transient: a
// timeout, too few replicas, an overloaded node) is tried again with jittered exponential backoff,
// up to Tries times. Every statement of 1 to 3 but the mark is idempotent; the mark is a
// compare-and-set, which a timeout leaves undecided (its Paxos proposal may be accepted later), so
// its outcome is read at the serial level (ReplayMark) before it is tried again: a quorum read can
// miss an accepted proposal. A record retried after a timeout may have written its copy the first
// time too (two copies at the floor, settled as below). The run stops only on a statement that
// keeps failing, and says at which dead letter and how many are left. Marks go one at a time per
// dead_day partition (every dead letter of a day shares it): Paxos rounds sent at once on one
// partition contend rather than queue, and under load the losers time out, which is what stopped
// replays before.
//
// A crash between 1 and 3 leaves the dead letter unmarked: running the id again writes a second
// copy at (g+1, 0). Both copies stand at the floor, and whichever runs first settles the other
// (its outcome commits the step or raises the floor past it), so the step is executed once.
//
// It never deletes markers, never touches the directory but through the recorder, and never
// replays a step whose marker is COMMITTED.
//
//	list, err := deadletter.List(ctx, store, deadletter.Filter{Since: since, Until: now})
//	res, err := deadletter.Replay(ctx, store, rec, filter, deadletter.ReplayOptions{ID: "incident-42", Rate: 500})
//	n, err := deadletter.Purge(ctx, store, deadletter.Filter{Until: now.Add(-30 * 24 * time.Hour)})
package deadletter
