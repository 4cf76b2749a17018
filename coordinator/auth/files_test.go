package auth

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Tokens of these tests: long enough for CheckToken, one per role.
const (
	tokOrders    = "orders-token-0000000000000001"
	tokOrdersNew = "orders-token-0000000000000002"
	tokOther     = "other-ring-token-000000000001"
	tokAdmin     = "admin-token-00000000000000001"
	clusterSec   = "cluster-secret-000000000000001"
)

var (
	testRing  = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
	otherRing = lease.RingKey{Region: "eu", Cluster: "c1", Service: "payments"}
)

// tokenLine is the tokens-file line of token for ring (the zero ring: an admin token).
func tokenLine(ring lease.RingKey, token string) string {
	if ring == (lease.RingKey{}) {
		return `- {hash: "` + HashToken(token) + `"}` + "\n"
	}
	return `- {ring: "` + ring.String() + `", hash: "` + HashToken(token) + `", name: "` + token[:6] + `"}` + "\n"
}

// writeAuthFile writes content to path, replacing the file (as a Secret update does).
func writeAuthFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileErrorsSayWhereAndWhat: every mistake in a tokens or secret file is one line naming
// the line of the file and what is wrong, in the file's own terms (its keys, not Go's types).
func TestFileErrorsSayWhereAndWhat(t *testing.T) {
	good := `- {ring: eu/c1/orders, hash: "` + HashToken(tokOrders) + `", name: a}` + "\n"
	for _, tc := range []struct {
		name  string
		parse func([]byte) error
		file  string
		want  string
	}{
		{"worker tokens: unknown key", workers, good + "\n- ring: eu/c1/orders\n  hashh: x\n",
			`line 4: field "hashh" not found; entries take ring, hash, name`},
		{"admin tokens: unknown key", admins, `- {sha256: "` + HashToken(tokAdmin) + `"}` + "\n",
			`line 1: field "sha256" not found; entries take hash, name`},
		{"worker tokens: a mapping", workers, "ring: eu/c1/orders\nhash: x\n",
			`line 1: want a list of entries (- {ring, hash, name}), found a mapping`},
		{"worker tokens: a list of strings", workers, good + "- eu/c1/orders\n",
			`line 2: want an entry {ring, hash, name}, found a string`},
		{"worker tokens: a list as the ring", workers, "- {ring: [eu, c1, orders], hash: x}\n",
			`line 1: want a text value, found a list`},
		{"not YAML", workers, "- {ring: eu/c1/orders\n",
			`not YAML: line 1: did not find expected ',' or '}'`},
		{"worker tokens: a plain token", workers, good + "- {ring: eu/c1/orders, hash: " + tokOrders + "}\n",
			`line 2 (entry 2): hash must be "sha256:" and 64 hex digits`},
		{"worker tokens: no ring", workers, good + "- {hash: x}\n",
			`line 2 (entry 2): no ring (want ring: REGION/CLUSTER/SERVICE)`},
		{"admin tokens: a ring", admins, good,
			`line 1 (entry 1): an admin token has no ring (ring: is for --worker-tokens); entries take hash, name`},
		{"cluster secret: two lines", secret, clusterSec + "\n" + clusterSec + "\n",
			`want the secret alone on one line, found 2 lines`},
		{"cluster secret: short", secret, "short\n",
			`the secret: a token is 16 to`},
	} {
		err := tc.parse([]byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line with %q", tc.name, err, tc.want)
		}
	}
}

func workers(b []byte) error { _, err := ParseWorkerTokens(b); return err }
func admins(b []byte) error  { _, err := ParseAdminTokens(b); return err }
func secret(b []byte) error  { _, err := ParseClusterSecret(b); return err }

// TestFileReloadsSayWhatHappened: a Secret edited at run time logs, once per change, why a
// broken content is not used, and when a usable one is taken (a new one, or the old one back).
func TestFileReloadsSayWhatHappened(t *testing.T) {
	path := filepath.Join(t.TempDir(), "workers.yaml")
	first := tokenLine(testRing, tokOrders)
	writeAuthFile(t, path, first)
	var logs bytes.Buffer
	a, err := New(Files{WorkerTokens: path}, zerolog.New(&logs).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	expect := func(step string, want ...string) {
		t.Helper()
		var got []string
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		for _, l := range lines[seen:] {
			seen++
			var e struct{ Message string }
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			got = append(got, e.Message)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: logged\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	expect("first load", "loaded --worker-tokens "+path+": 1 token for 1 ring")

	// Run re-reads the file every second too: whoever reads a change, it is logged once.
	writeAuthFile(t, path, first+"- {ring: eu/c1/orders, hashh: x}\n")
	for range 3 {
		a.Reload()
	}
	expect("a broken edit, read three times",
		"cannot use the changed --worker-tokens "+path+`: line 2: field "hashh" not found; entries take ring, hash, name; keeping the last good content`)

	writeAuthFile(t, path, first)
	a.Reload()
	a.Reload()
	expect("the edit undone", "--worker-tokens "+path+" is usable again, as it was: 1 token for 1 ring still in force")

	writeAuthFile(t, path, first+tokenLine(testRing, tokOrdersNew)+tokenLine(otherRing, tokOther))
	a.Reload()
	a.Reload()
	expect("new tokens", "reloaded --worker-tokens "+path+": 3 tokens for 2 rings")
}
