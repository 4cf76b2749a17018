package auth

import (
	"strings"
	"testing"
)

// FuzzParseWorkerTokens: whatever a --worker-tokens file holds, the parser answers a set or one
// error line, never panics, and only admits entries it could check: every ring it keeps is
// valid and every digest came from a sha256: entry. Seeds in testdata/fuzz/FuzzParseWorkerTokens.
func FuzzParseWorkerTokens(f *testing.F) {
	f.Add([]byte(tokenLine(testRing, tokOrders) + tokenLine(otherRing, tokOther)))
	f.Fuzz(func(t *testing.T, data []byte) {
		wt, err := ParseWorkerTokens(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		n := 0
		for ring, ds := range wt.byRing {
			if ring.Validate() != nil {
				t.Fatalf("kept an invalid ring %q", ring)
			}
			n += len(ds)
		}
		if n != wt.count || strings.Count(string(data), HashPrefix) < n {
			t.Fatalf("kept %d digests (count %d) from a file of %d %s entries", n, wt.count, strings.Count(string(data), HashPrefix), HashPrefix)
		}
	})
}

// FuzzParseAdminTokens: the same for --admin-token-file, whose entries have no ring.
func FuzzParseAdminTokens(f *testing.F) {
	f.Add([]byte(tokenLine(testRing, tokAdmin)))
	f.Fuzz(func(t *testing.T, data []byte) {
		at, err := ParseAdminTokens(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if strings.Count(string(data), HashPrefix) < len(at.tokens) {
			t.Fatalf("kept %d digests from a file without as many %s entries", len(at.tokens), HashPrefix)
		}
	})
}
