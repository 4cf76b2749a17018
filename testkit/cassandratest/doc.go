// Package cassandratest connects tests to the project's real single-node Apache Cassandra.
//
// The node is started by scripts/cassandra.sh (make cassandra-start) on 127.0.0.1:9042 with
// commitlog_sync: batch and tombstone_warn_threshold: 100; see docs/cassandra.md. Tests never skip
// when it is missing: Session fails the test and says how to start it.
//
// StartSecure starts a second node beside it, for the tests of client encryption and
// PasswordAuthenticator: 127.0.0.2:9142 with certificates made for the test, the shared node's
// jars and a fresh data dir (docs/cassandra.md, "TLS and authentication"); it is stopped when the
// test ends.
//
// Environment:
//   - RETRYRING_CASSANDRA: host:port of the native transport (default 127.0.0.1:9042).
//   - RETRYRING_CASSANDRA_LOG: the Cassandra system log (default <CASSANDRA_HOME_DIR or repo/.cassandra>/log/system.log).
//   - CASSANDRA_TLS_HOME_DIR: home of StartSecure's node (default <repo>/.cassandra-tls);
//     CASSANDRA_LIB_DIR: its jars (default the shared node's lib dir).
//
// Typical use:
//
//	s := cassandratest.Session(t)
//	ks := cassandratest.NewKeyspace(t) // dropped when the test ends
//	err := s.Query("CREATE TABLE " + ks + ".t (k text PRIMARY KEY)").Exec()
package cassandratest
