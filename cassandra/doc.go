// Package cassandra owns everything that touches Apache Cassandra: the CQL schema of the
// five-tier retry directory (plus execution markers, dead letters and scan checkpoints), every
// statement the data plane runs (queries.go), session setup, and the Murmur3 token of an
// instance id computed exactly as Cassandra's Murmur3Partitioner does.
//
// What it must never do:
//   - run a statement that does not name its full partition key (no ALLOW FILTERING, no
//     cross-partition scans): every read here is one partition;
//   - delete tier-5 failures row by row on the normal path (DeleteBucketPartition leaves one
//     partition tombstone; row deletes leave one tombstone per row that later reads count);
//   - retry a statement that is not idempotent (the checkpoint compare-and-sets);
//   - decide policy: which window is readable, who may delete what and when belong to the
//     window package, the recorder and the worker. A Store only runs the statements.
//
// Use:
//
//	session, err := cassandra.Connect(ctx, cassandra.Config{Hosts: []string{"127.0.0.1:9042"}})
//	err = cassandra.ApplySchema(ctx, session, "retryring", cassandra.Replication{Factor: 1})
//	st, err := cassandra.NewStore(session, cassandra.StoreConfig{
//		Keyspace: "retryring", Ring: ring, WindowMinutes: 1})
//	days, cp, err := st.ListLiveDays(ctx, 2026)
//	ws, wcp, err := st.ListLiveWindows(ctx, days[0])
//	ins, err := st.ListInstances(ctx, ws[0], leasedRange)
//	err = st.ForEachTransaction(ctx, cassandra.BucketKey{Window: ws[0], InstanceID: ins[0].ID, Bucket: 0}, fn)
//
// Connect also does client encryption (Config.TLS, Config.ServerName; the nodes' certificates are
// always verified) and PasswordAuthenticator (Config.Username, Config.Password). When it fails it
// says why in one line (ConnectError, wrapping ErrLogin or ErrTLS): gocql's own error flattens the
// cause into a long message.
//
// docs/schema.md is the contract for writers in other languages: the tables, why each key is
// what it is, the order of writes, and who deletes what.
package cassandra
