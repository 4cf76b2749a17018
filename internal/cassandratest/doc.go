// Package cassandratest connects tests to the project's real single-node Apache Cassandra.
//
// The node is started by scripts/cassandra.sh (make cassandra-start) on 127.0.0.1:9042 with
// commitlog_sync: batch and tombstone_warn_threshold: 100; see docs/cassandra.md. Tests never skip
// when it is missing: Session fails the test and says how to start it.
//
// Environment:
//   - RETRYRING_CASSANDRA: host:port of the native transport (default 127.0.0.1:9042).
//   - RETRYRING_CASSANDRA_LOG: the Cassandra system log (default <CASSANDRA_HOME_DIR or repo/.cassandra>/log/system.log).
//
// Typical use:
//
//	s := cassandratest.Session(t)
//	ks := cassandratest.NewKeyspace(t) // dropped when the test ends
//	err := s.Query("CREATE TABLE " + ks + ".t (k text PRIMARY KEY)").Exec()
package cassandratest
