// Package storetest gives tests a real Cassandra keyspace holding the retry schema, created
// once per test binary, and a fresh Store per test whose ring key no other test uses, so
// tests share the keyspace without seeing each other's rows.
//
// It fails tests (never skips them) when Cassandra is missing. Call Main from TestMain so that
// the keyspace is dropped when the binary ends:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
//	func TestX(t *testing.T) {
//		st := storetest.Store(t, 1) // 1-minute windows
//		...
//	}
package storetest
