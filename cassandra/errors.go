package cassandra

import "errors"

var (
	// ErrKeyspace means a keyspace name is not a plain CQL identifier (a letter, then at most 47
	// letters, digits or underscores). Names are spliced into statements, so nothing else passes.
	ErrKeyspace = errors.New("cassandra: invalid keyspace name")
	// ErrReplication means a replication setting is malformed or has a factor below one.
	ErrReplication = errors.New("cassandra: invalid replication")
	// ErrReplicationUnmet means the cluster has fewer nodes than a replication places replicas
	// on (in all, or in a datacenter it names): Cassandra would create the keyspace, and then
	// every write at a quorum would fail. The message names the shortfall and the cluster's nodes.
	ErrReplicationUnmet = errors.New("cassandra: replication refused")
	// ErrConsistency means a consistency level name is not one Cassandra knows.
	ErrConsistency = errors.New("cassandra: invalid consistency level")
	// ErrWeakConsistency means the consistency level reads or writes fewer replicas than a quorum
	// and the operator did not allow it: a new owner of a range could miss a COMMITTED marker.
	ErrWeakConsistency = errors.New("cassandra: consistency level below a quorum refused")
	// ErrConfig means a session or store setting is out of range.
	ErrConfig = errors.New("cassandra: invalid configuration")
	// ErrInstanceID means an instance id is empty or not valid UTF-8: Cassandra refuses an empty
	// partition key and every text value that is not UTF-8, and Token would not match.
	ErrInstanceID = errors.New("cassandra: instance id must be non-empty valid UTF-8")
	// ErrCheckpointContended means a checkpoint could not be moved because other writers kept
	// changing it; the caller may try again later. Its scans stay correct meanwhile.
	ErrCheckpointContended = errors.New("cassandra: checkpoint kept changing under compare-and-set")
	// ErrSchemaOutdated means the keyspace lacks a table or column this release reads or writes:
	// `retryring schema apply` adds it.
	ErrSchemaOutdated = errors.New("cassandra: keyspace schema is older than this release (run `retryring schema apply`)")
	// ErrDeadLetterChanged means a dead letter was not marked replayed because its row is not the
	// one the replay read any more: it was purged, or its step was given up on again and the row
	// written over. Trying again would not help; the caller reports it.
	ErrDeadLetterChanged = errors.New("cassandra: dead letter changed since it was read")
)

// Errors of Connect that say why no session could be opened. Each wraps the driver's error too.
var (
	// ErrLogin means a node refused the login: wrong username or password, a role that may not
	// log in, or no credentials given to a node that runs PasswordAuthenticator.
	ErrLogin = errors.New("cassandra: login refused")
	// ErrTLS means the TLS settings and the node's do not fit: a node's certificate failed
	// verification (unknown CA, another name, expired), the node refused the client certificate
	// or wanted one, or one side speaks TLS and the other does not.
	ErrTLS = errors.New("cassandra: TLS")
)
