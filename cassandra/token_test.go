package cassandra

import (
	"math"
	"testing"
)

// Values returned by `SELECT token(k)` from Apache Cassandra 5.0.8 (Murmur3Partitioner) for a
// text partition key k. They pin the hash without a running Cassandra; TestTokenMatchesCassandra
// checks 10,000 more against the real one.
var cassandraTokens = []struct {
	id    string
	token int64
}{
	{"abc", -5434086359492102041},
	{"a", -8839064797231613815},
	{"order-service-pod-1", -7762174313861726209},
	{"ééééééééé", -4435790217887533966},
	{"0123456789abcdef", 5467490433528156583},
	{"0123456789abcdefé", 8755401265980413160},
	{"🙂🙂🙂🙂x", 422923307532219705},
	{"日本語のテキスト", 1117207337165023463},
}

func TestTokenVectors(t *testing.T) {
	for _, c := range cassandraTokens {
		if got := Token(c.id); got != c.token {
			t.Errorf("Token(%q) = %d, Cassandra says %d", c.id, got, c.token)
		}
	}
}

func TestTokenNeverMinimum(t *testing.T) {
	// No key may take the ring's minimum token; no short id is known to hash to it, so the
	// mapping is checked on the value itself.
	if got := normalizeToken(math.MinInt64); got != math.MaxInt64 {
		t.Fatalf("normalizeToken(MinInt64) = %d, want MaxInt64", got)
	}
	for _, h := range []int64{math.MinInt64 + 1, -1, 0, math.MaxInt64} {
		if normalizeToken(h) != h {
			t.Fatalf("normalizeToken(%d) changed it", h)
		}
	}
}

func TestValidateInstanceID(t *testing.T) {
	for _, bad := range []string{"", "\xff\xfe", "ok\x80"} {
		if err := ValidateInstanceID(bad); err == nil {
			t.Errorf("ValidateInstanceID(%q) accepted", bad)
		}
	}
	if err := ValidateInstanceID("pod-1"); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkToken(b *testing.B) {
	id := "order-service-7d9f8c6b5-x2k4p"
	for b.Loop() {
		_ = Token(id)
	}
}
