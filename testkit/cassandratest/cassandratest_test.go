package cassandratest

import (
	"strings"
	"testing"
)

func TestReleaseVersion(t *testing.T) {
	s := Session(t)
	var v string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&v); err != nil {
		t.Fatalf("select release_version: %v", err)
	}
	if !strings.HasPrefix(v, "5.0.") {
		t.Fatalf("release_version = %q, want 5.0.x", v)
	}
	t.Logf("Cassandra %s at %s, log %s", v, Addr(), LogPath())
}

func TestNewKeyspace(t *testing.T) {
	s := Session(t)
	ks := NewKeyspace(t)
	if err := s.Query("CREATE TABLE " + ks + ".kv (k text PRIMARY KEY, v int)").Exec(); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("INSERT INTO "+ks+".kv (k, v) VALUES (?, ?)", "abc", 1).Exec(); err != nil {
		t.Fatal(err)
	}
	var tok int64
	var v int
	if err := s.Query("SELECT token(k), v FROM "+ks+".kv WHERE k = ?", "abc").Scan(&tok, &v); err != nil {
		t.Fatal(err)
	}
	if v != 1 {
		t.Fatalf("v = %d, want 1", v)
	}
	t.Logf("keyspace %s, token('abc') = %d", ks, tok)
}

func TestKeyspaceName(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []string{"TestX", "TestA/sub-test with spaces", strings.Repeat("VeryLong", 20)} {
		ks := keyspaceName(n)
		if len(ks) > 48 || seen[ks] || ks[0] < 'a' || ks[0] > 'z' {
			t.Fatalf("bad keyspace name %q", ks)
		}
		for _, r := range ks {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
				t.Fatalf("bad keyspace name %q", ks)
			}
		}
		seen[ks] = true
	}
}
