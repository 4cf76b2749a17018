package cassandra

import "strings"

// Every CQL statement the data plane runs lives in this file, so that a reader can check them
// all against the schema in one place, and so that docs/schema.md can quote them. "KS." is
// replaced by the keyspace when a Store is built: statements name their keyspace instead of
// relying on a session keyspace, so that one session can serve several keyspaces (tests do).
//
// Every statement binds every partition-key column as a parameter, which is what lets gocql's
// token-aware policy send it straight to a replica of that partition.
const (
	// The deletes of tiers 1 to 5 carry their timestamp in the statement (USING TIMESTAMP, chosen
	// once by the deleter: see CheckedDeleteTime), never the driver's: a retry of the statement
	// must not stamp it later, and the deleter's clock reading must come from before its check.

	// Tier 1: the days of a year that may hold work.
	cqlInsertDay = `INSERT INTO KS.es_days_by_year (region, cluster, service_name, year, date_of_year)
VALUES (?, ?, ?, ?, ?)`
	cqlSelectDays = `SELECT date_of_year FROM KS.es_days_by_year
WHERE region = ? AND cluster = ? AND service_name = ? AND year = ? AND date_of_year >= ?
ORDER BY date_of_year ASC`
	cqlSelectDay = `SELECT date_of_year FROM KS.es_days_by_year
WHERE region = ? AND cluster = ? AND service_name = ? AND year = ? AND date_of_year = ?`
	cqlDeleteDay = `DELETE FROM KS.es_days_by_year USING TIMESTAMP ?
WHERE region = ? AND cluster = ? AND service_name = ? AND year = ? AND date_of_year = ?`

	// Tier 2: the windows of a day that may hold work.
	cqlInsertWindow = `INSERT INTO KS.es_retry_windows_by_day (region, cluster, service_name, date_of_year, minute_of_day)
VALUES (?, ?, ?, ?, ?)`
	cqlSelectWindows = `SELECT minute_of_day FROM KS.es_retry_windows_by_day
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day >= ?
ORDER BY minute_of_day ASC`
	cqlSelectWindow = `SELECT minute_of_day FROM KS.es_retry_windows_by_day
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?`
	cqlDeleteWindow = `DELETE FROM KS.es_retry_windows_by_day USING TIMESTAMP ?
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?`

	// Tier 3: the instance markers of a window, clustered by the token of the instance id.
	cqlInsertInstance = `INSERT INTO KS.es_instances_by_retry_window
(region, cluster, service_name, date_of_year, minute_of_day, instance_id_token, instance_id)
VALUES (?, ?, ?, ?, ?, ?, ?)`
	cqlSelectInstancesInRange = `SELECT instance_id_token, instance_id FROM KS.es_instances_by_retry_window
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
AND instance_id_token >= ? AND instance_id_token <= ?`
	cqlSelectInstances = `SELECT instance_id_token, instance_id FROM KS.es_instances_by_retry_window
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?`
	cqlSelectInstancesLimit = `SELECT instance_id_token, instance_id FROM KS.es_instances_by_retry_window
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
LIMIT ?`
	cqlDeleteInstance = `DELETE FROM KS.es_instances_by_retry_window USING TIMESTAMP ?
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
AND instance_id_token = ? AND instance_id = ?`

	// Tier 4: the buckets an instance wrote into in a window.
	cqlInsertBucket = `INSERT INTO KS.es_buckets_by_instance
(region, cluster, service_name, date_of_year, minute_of_day, instance_id, bucket_index)
VALUES (?, ?, ?, ?, ?, ?, ?)`
	cqlSelectBuckets = `SELECT bucket_index FROM KS.es_buckets_by_instance
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ? AND instance_id = ?`
	cqlDeleteBucket = `DELETE FROM KS.es_buckets_by_instance USING TIMESTAMP ?
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ? AND instance_id = ?
AND bucket_index = ?`

	// Tier 5: the failures of one bucket. Metadata only; the payload stays in the event store.
	cqlInsertTransaction = `INSERT INTO KS.es_retry_transactions_by_instance
(region, cluster, service_name, date_of_year, minute_of_day, instance_id, bucket_index,
 transaction_id, added_datetime, allocation_key, stacksaga_impl_type, attempt, replay)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	cqlSelectTransactions = `SELECT transaction_id, added_datetime, allocation_key, stacksaga_impl_type, attempt, replay
FROM KS.es_retry_transactions_by_instance
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
AND instance_id = ? AND bucket_index = ?`
	// The partition delete: one partition tombstone for the whole bucket, never counted by
	// later reads, dropped whole by compaction.
	cqlDeleteBucketPartition = `DELETE FROM KS.es_retry_transactions_by_instance USING TIMESTAMP ?
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
AND instance_id = ? AND bucket_index = ?`
	cqlDeleteTransaction = `DELETE FROM KS.es_retry_transactions_by_instance
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? AND minute_of_day = ?
AND instance_id = ? AND bucket_index = ? AND transaction_id = ?`

	// Scan checkpoints (see docs/schema.md): Paxos-managed single-row partitions.
	cqlSelectWindowCheckpoint = `SELECT first_live_minute, version FROM KS.es_window_checkpoints
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ?`
	cqlInsertWindowCheckpoint = `INSERT INTO KS.es_window_checkpoints
(region, cluster, service_name, date_of_year, first_live_minute, version)
VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`
	cqlUpdateWindowCheckpoint = `UPDATE KS.es_window_checkpoints SET first_live_minute = ?, version = ?
WHERE region = ? AND cluster = ? AND service_name = ? AND date_of_year = ? IF version = ?`
	cqlSelectDayCheckpoint = `SELECT first_live_date, version FROM KS.es_day_checkpoints
WHERE region = ? AND cluster = ? AND service_name = ? AND year = ?`
	cqlInsertDayCheckpoint = `INSERT INTO KS.es_day_checkpoints
(region, cluster, service_name, year, first_live_date, version)
VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS`
	cqlUpdateDayCheckpoint = `UPDATE KS.es_day_checkpoints SET first_live_date = ?, version = ?
WHERE region = ? AND cluster = ? AND service_name = ? AND year = ? IF version = ?`

	// STRICT execution markers. IN_PROGRESS, COMMITTED and DEAD_LETTERED each have cells of
	// their own, written only by their own statement below: an IN_PROGRESS that lands late, or
	// expires (its tombstone at its write timestamp), and a duplicate copy's DEAD_LETTERED leave a
	// COMMITTED as it was (invariants 7 and 9). execution_state, lease_owner and updated_at are
	// where a release before these cells wrote every state: read, never written, until what they
	// hold expired (one retention period after the upgrade).
	cqlSelectMarker = `SELECT committed_by, committed_at, TTL(committed_at),
dead_lettered_by, dead_lettered_at, TTL(dead_lettered_at),
in_progress_by, in_progress_at, TTL(in_progress_at),
execution_state, lease_owner, updated_at, TTL(execution_state),
floor_replay, floor_attempt, TTL(floor_attempt) FROM KS.es_execution_markers
WHERE service_name = ? AND transaction_id = ? AND span_key = ?`
	// The floor has cells of its own, written only here: the state statements never touch
	// them. Its write timestamp is the copy's order (floorTimestamp), so that of two floor
	// writes the newer copy wins whatever order they land in: a late write for an older copy
	// never lowers the floor.
	cqlSetFloor = `UPDATE KS.es_execution_markers USING TTL ? AND TIMESTAMP ?
SET floor_replay = ?, floor_attempt = ?
WHERE service_name = ? AND transaction_id = ? AND span_key = ?`
	cqlMarkInProgress = `UPDATE KS.es_execution_markers USING TTL ?
SET in_progress_by = ?, in_progress_at = ?
WHERE service_name = ? AND transaction_id = ? AND span_key = ?`
	cqlMarkCommitted = `UPDATE KS.es_execution_markers USING TTL ?
SET committed_by = ?, committed_at = ?
WHERE service_name = ? AND transaction_id = ? AND span_key = ?`
	cqlMarkDeadLettered = `UPDATE KS.es_execution_markers USING TTL ?
SET dead_lettered_by = ?, dead_lettered_at = ?
WHERE service_name = ? AND transaction_id = ? AND span_key = ?`

	// Dead letters.
	// A dead letter is written whole, its replay mark cleared: the same step given up on again
	// the same day (after a replay) overwrites its row, and must read as not replayed. Clearing is
	// not enough alone: the mark is a compare-and-set stamped by its Paxos ballot (Cassandra's
	// clock), this insert by the worker's clock, so a mark written just before it can carry the
	// later timestamp and survive it. The mark therefore names the dead_at it was written for
	// (replayed_dead_at), and reads count it only on that dead letter.
	cqlInsertDeadLetter = `INSERT INTO KS.es_dead_letters
(region, cluster, service_name, dead_day, transaction_id, instance_id, date_of_year, minute_of_day,
 bucket_index, added_datetime, allocation_key, stacksaga_impl_type, attempt, last_status, last_error,
 dead_at, worker_id, replay, replayed_by, replayed_at, replayed_dead_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, null, null, null)`
	cqlSelectDeadLetters = `SELECT transaction_id, instance_id, date_of_year, minute_of_day, bucket_index,
added_datetime, allocation_key, stacksaga_impl_type, attempt, last_status, last_error, dead_at, worker_id,
replay, replayed_by, replayed_at, replayed_dead_at
FROM KS.es_dead_letters
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ?`
	// The mark is conditional on the row the replay read (its dead_at, which every release writes
	// with every version of the row): a plain update would mark a newer dead letter of the step
	// written over the row meanwhile (given up on again, a generation later), and would bring a
	// purged row back as a ghost of the key and the mark alone.
	cqlMarkDeadLetterReplayed = `UPDATE KS.es_dead_letters SET replayed_by = ?, replayed_at = ?, replayed_dead_at = ?
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ? AND transaction_id = ? AND stacksaga_impl_type = ?
IF dead_at = ?`
	// Read at the serial level after a mark whose outcome is unknown (a compare-and-set timeout):
	// a serial read completes any Paxos round in progress on the row, so it sees the mark if it was
	// accepted, where a quorum read could miss it.
	cqlSelectDeadLetterMark = `SELECT dead_at, replayed_by, replayed_dead_at FROM KS.es_dead_letters
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ? AND transaction_id = ? AND stacksaga_impl_type = ?`
	cqlDeleteDeadLetter = `DELETE FROM KS.es_dead_letters
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ? AND transaction_id = ? AND stacksaga_impl_type = ?`
	// A day of dead letters at once: one partition tombstone.
	cqlDeleteDeadLetterDay = `DELETE FROM KS.es_dead_letters
WHERE region = ? AND cluster = ? AND service_name = ? AND dead_day = ?`

	// Replay runs: the snapshot bound of each --id, so that running it again replays nothing new.
	cqlInsertReplayRun = `INSERT INTO KS.es_dead_letter_replays (region, cluster, service_name, replay_id, started_at)
VALUES (?, ?, ?, ?, ?) IF NOT EXISTS`
	cqlSelectReplayRun = `SELECT started_at FROM KS.es_dead_letter_replays
WHERE region = ? AND cluster = ? AND service_name = ? AND replay_id = ?`
)

// inKeyspace qualifies a statement's tables with ks.
func inKeyspace(stmt, ks string) string { return strings.ReplaceAll(stmt, "KS.", ks+".") }
