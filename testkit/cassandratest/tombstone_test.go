package cassandratest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTombstoneWarningLogged shows how a test proves a query stays under (or goes over)
// tombstone_warn_threshold: the server's own warning lands in TombstoneLogPath.
func TestTombstoneWarningLogged(t *testing.T) {
	s := Session(t)
	var v string
	if err := s.Query("SELECT value FROM system_views.settings WHERE name = 'tombstone_warn_threshold'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	warn, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("tombstone_warn_threshold %q: %v", v, err)
	}
	ks := NewKeyspace(t)
	if err := s.Query("CREATE TABLE " + ks + ".rows (p text, c int, PRIMARY KEY (p, c))").Exec(); err != nil {
		t.Fatal(err)
	}
	n := warn + 10
	for c := 0; c < n; c++ {
		if err := s.Query("INSERT INTO "+ks+".rows (p, c) VALUES ('p', ?)", c).Exec(); err != nil {
			t.Fatal(err)
		}
		if err := s.Query("DELETE FROM "+ks+".rows WHERE p = 'p' AND c = ?", c).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	iter := s.Query("SELECT c FROM " + ks + ".rows WHERE p = 'p'").Iter()
	warnings := iter.Warnings() // gocql forgets them on Close
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	if len(warnings) == 0 || !strings.Contains(warnings[0], "tombstone_warn_threshold") {
		t.Errorf("client warnings %q: want the tombstone warning", warnings)
	}
	want := []byte("tombstone cells for query SELECT * FROM " + ks + ".rows")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(TombstoneLogPath())
		if err == nil && bytes.Contains(b, want) {
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, ks) {
					t.Logf("%s", l)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %s (err %v)", want, TombstoneLogPath(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
