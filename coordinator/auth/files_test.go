package auth

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/authtest"
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
		return EntryLine("", token, "") + "\n"
	}
	return EntryLine(ring.String(), token, token[:6]) + "\n"
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
	authtest.ReplaceFile(t, path, first)
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
	authtest.ReplaceFile(t, path, first+"- {ring: eu/c1/orders, hashh: x}\n")
	for range 3 {
		a.Reload()
	}
	expect("a broken edit, read three times",
		"cannot use the changed --worker-tokens "+path+`: line 2: field "hashh" not found; entries take ring, hash, name; keeping the last good content`)

	authtest.ReplaceFile(t, path, first)
	a.Reload()
	a.Reload()
	expect("the edit undone", "--worker-tokens "+path+" is usable again, as it was: 1 token for 1 ring still in force")

	authtest.ReplaceFile(t, path, first+tokenLine(testRing, tokOrdersNew)+tokenLine(otherRing, tokOther))
	a.Reload()
	a.Reload()
	expect("new tokens", "reloaded --worker-tokens "+path+": 3 tokens for 2 rings")
}

// EntryLine writes the lines `token new` prints and the tokens files hold: a worker token names
// its ring, an admin token none, and the file reader admits each for what it says.
func TestEntryLineIsReadBack(t *testing.T) {
	const tok = "entry-line-token-000000000001"
	if got, want := EntryLine("eu/c1/orders", tok, "orders-2026"), `- {ring: "eu/c1/orders", hash: "`+HashToken(tok)+`", name: "orders-2026"}`; got != want {
		t.Fatalf("worker line %s, want %s", got, want)
	}
	if got, want := EntryLine("", tok, ""), `- {hash: "`+HashToken(tok)+`"}`; got != want {
		t.Fatalf("admin line %s, want %s", got, want)
	}
	wt, err := ParseWorkerTokens([]byte(EntryLine("eu/c1/orders", tok, "orders-2026") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := wt.Match(lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}, DigestOf(tok)); !ok || name != "orders-2026" {
		t.Fatalf("the worker line admits %q %v", name, ok)
	}
	if _, ok := wt.Match(otherRing, DigestOf(tok)); ok {
		t.Fatal("the worker line admits another ring")
	}
	at, err := ParseAdminTokens([]byte(EntryLine("", tok, "") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := at.Match(DigestOf(tok)); !ok {
		t.Fatal("the admin line does not admit its token")
	}
}
