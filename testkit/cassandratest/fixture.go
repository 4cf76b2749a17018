package cassandratest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// KeyspaceFromFixture creates a keyspace as NewKeyspace does and runs in it the CQL of a schema
// fixture (cassandra/testdata/schema-*.cql: "--" comment lines, statements that end with a
// semicolon at the end of a line, tables qualified as "KS."), so that a test can start from the
// tables an earlier release created. It returns the keyspace's name.
func KeyspaceFromFixture(t testing.TB, path string) string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cassandratest: schema fixture: %v", err)
	}
	ks := NewKeyspace(t)
	s := Session(t)
	var lines []string
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "--") {
			lines = append(lines, line)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";\n") {
		stmt = strings.TrimSpace(strings.ReplaceAll(stmt, "KS.", ks+"."))
		if stmt == "" {
			continue
		}
		if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("cassandratest: %s: %s: %v", path, strings.SplitN(stmt, "\n", 2)[0], err)
		}
	}
	return ks
}
