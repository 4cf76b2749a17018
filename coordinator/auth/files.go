package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retryring/retryring/lease"
)

// The token files (--worker-tokens, --admin-token-file) hold digests, never secrets: a leaked file
// admits nobody. A token is any string of MinTokenBytes to MaxTokenBytes printable bytes; its entry
// is "sha256:" and the 64 hex digits of SHA-256 of those bytes (`retryring token hash`).
//
//	# --worker-tokens: several entries per ring for rotation; name is for people and logs.
//	- {ring: eu-west/c1/orders, hash: "sha256:9f86d0...", name: orders-2026-12}
//	- {ring: eu-west/c1/orders, hash: "sha256:60303a...", name: orders-2027-01}
//
//	# --admin-token-file
//	- {hash: "sha256:2c26b4...", name: alice}
const (
	HashPrefix    = "sha256:"
	MinTokenBytes = 16
	MaxTokenBytes = lease.MaxSetupTokenBytes
	// maxAuthFileBytes bounds a token file: it is read every second.
	maxAuthFileBytes = 1 << 20
)

// ErrBadFile is wrapped by every error about a token or secret file.
var ErrBadFile = errors.New("auth: bad token or secret file")

// Digest is the SHA-256 of a token. Tokens are compared as digests, in constant time, so that
// neither the file nor the time a comparison takes tells anything about a valid token.
type Digest [sha256.Size]byte

// DigestOf is the digest of token.
func DigestOf(token string) Digest { return sha256.Sum256([]byte(token)) }

// HashToken is the entry of a token in a tokens file: "sha256:<hex>".
func HashToken(token string) string {
	d := DigestOf(token)
	return HashPrefix + hex.EncodeToString(d[:])
}

// EntryLine is the tokens-file line that admits token: a worker token of ring when ring is set (as
// "region/cluster/service"), an admin token when it is empty; name, if set, labels the entry in
// logs. The line holds the token's hash only, never the token.
func EntryLine(ring, token, name string) string {
	fields := []string{}
	if ring != "" {
		fields = append(fields, "ring: "+strconv.Quote(ring))
	}
	fields = append(fields, "hash: "+strconv.Quote(HashToken(token)))
	if name != "" {
		fields = append(fields, "name: "+strconv.Quote(name))
	}
	return "- {" + strings.Join(fields, ", ") + "}"
}

// CheckToken refuses a token that no tokens file could admit (too short, too long, or with
// bytes a file or environment variable would mangle).
func CheckToken(token string) error {
	if len(token) < MinTokenBytes || len(token) > MaxTokenBytes {
		return fmt.Errorf("a token is %d to %d bytes, this one %d", MinTokenBytes, MaxTokenBytes, len(token))
	}
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("a token is printable ASCII without spaces; byte %d is %#x", i, c)
		}
	}
	return nil
}

// namedDigest is one entry of a tokens file.
type namedDigest struct {
	digest Digest
	name   string
}

// matchDigest finds d among ds comparing every entry in constant time, without an early exit.
func matchDigest(ds []namedDigest, d Digest) (string, bool) {
	found, name := 0, ""
	for _, e := range ds {
		if subtle.ConstantTimeCompare(e.digest[:], d[:]) == 1 {
			found, name = 1, e.name
		}
	}
	return name, found == 1
}

// WorkerTokens is a parsed --worker-tokens file.
type WorkerTokens struct {
	byRing map[lease.RingKey][]namedDigest
	count  int
}

// summary says what the file holds, for the lines that log its loads: "3 tokens for 2 rings".
func (wt *WorkerTokens) summary() string {
	return plural(wt.count, "token") + " for " + plural(len(wt.byRing), "ring")
}

// Match finds the name of d among the tokens of ring, comparing in constant time.
func (wt *WorkerTokens) Match(ring lease.RingKey, d Digest) (name string, ok bool) {
	return matchDigest(wt.byRing[ring], d)
}

// AdminTokens is a parsed --admin-token-file.
type AdminTokens struct{ tokens []namedDigest }

// Match finds the name of d among the admin tokens, comparing in constant time.
func (at *AdminTokens) Match(d Digest) (name string, ok bool) { return matchDigest(at.tokens, d) }

func (at *AdminTokens) summary() string { return plural(len(at.tokens), "admin token") }

// ClusterSecret is a parsed --cluster-secret-file: the secret itself (every coordinator sends it)
// and its digest (what requests are compared with).
type ClusterSecret struct {
	secret string
	digest Digest
}

// Matches reports, in constant time, whether a coordinator sent this secret.
func (cs *ClusterSecret) Matches(sent string) bool {
	got := DigestOf(sent)
	return subtle.ConstantTimeCompare(got[:], cs.digest[:]) == 1
}

type fileEntry struct {
	Ring string `yaml:"ring"`
	Hash string `yaml:"hash"`
	Name string `yaml:"name"`
	// line is where the entry starts in the file, for errors.
	line int
}

// Keys of the entries of each file, as its errors name them.
const (
	workerEntryKeys = "ring, hash, name"
	adminEntryKeys  = "hash, name"
)

// decodeEntries reads a YAML sequence of entries, refusing unknown keys. keys lists the keys an
// entry takes, for the error about one it does not.
func decodeEntries(data []byte, keys string) ([]fileEntry, error) {
	var entries []fileEntry
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlProblem(err, keys)
	}
	// The entries decoded, so the document is a sequence of as many nodes: their lines.
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) == 1 {
		for i, item := range doc.Content[0].Content {
			if i < len(entries) {
				entries[i].line = item.Line
			}
		}
	}
	return entries, nil
}

// yamlTypeProblem matches the lines of a *yaml.TypeError that yamlProblem rewrites.
var (
	yamlUnknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type \S+$`)
	yamlWrongKind    = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+) (?:` + "`" + `[^` + "`" + `]*` + "`" + ` )?into (\S+)$`)
)

// yamlKinds names YAML's tags for people.
var yamlKinds = map[string]string{"map": "a mapping", "seq": "a list", "str": "a string", "int": "a number",
	"float": "a number", "bool": "a boolean", "null": "nothing", "timestamp": "a timestamp", "binary": "binary data"}

// yamlProblem rewrites a decoding error of a tokens file into one line that says where and what:
// yaml.v3 puts every problem on a line of its own after "yaml: unmarshal errors:", and names Go
// types, not what the file should hold.
func yamlProblem(err error, keys string) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("not YAML: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n", " "))
	}
	problems := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		e = strings.TrimSpace(e)
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			problems = append(problems, fmt.Sprintf("line %s: field %.60q not found; entries take %s", m[1], m[2], keys))
			continue
		}
		if m := yamlWrongKind.FindStringSubmatch(e); m != nil {
			found := yamlKinds[m[2]]
			if found == "" {
				found = "!!" + m[2]
			}
			want := "a text value"
			switch {
			case strings.HasPrefix(m[3], "[]"):
				want = "a list of entries (- {" + keys + "})"
			case strings.HasSuffix(m[3], "fileEntry"):
				want = "an entry {" + keys + "}"
			}
			problems = append(problems, fmt.Sprintf("line %s: want %s, found %s", m[1], want, found))
			continue
		}
		problems = append(problems, e)
	}
	// A key may hold a line break; the error stays one line.
	return errors.New(strings.ReplaceAll(strings.Join(problems, "; "), "\n", " "))
}

// where names an entry in errors: its line, and its place among the entries.
func (e fileEntry) where(i int) string {
	if e.line > 0 {
		return fmt.Sprintf("line %d (entry %d)", e.line, i+1)
	}
	return fmt.Sprintf("entry %d", i+1)
}

func parseDigest(i int, e fileEntry) (namedDigest, error) {
	h, ok := strings.CutPrefix(e.Hash, HashPrefix)
	var d Digest
	if !ok || len(h) != hex.EncodedLen(len(d)) {
		return namedDigest{}, fmt.Errorf(`%s: hash must be "sha256:" and 64 hex digits (make one with: retryring token hash); plain tokens never go in this file`, e.where(i))
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return namedDigest{}, fmt.Errorf("%s: hash: %v", e.where(i), err)
	}
	if len(e.Name) > 128 {
		return namedDigest{}, fmt.Errorf("%s: name longer than 128 bytes", e.where(i))
	}
	return namedDigest{digest: d, name: e.Name}, nil
}

// ParseWorkerTokens reads a --worker-tokens file. An empty file is valid: it admits nobody.
func ParseWorkerTokens(data []byte) (*WorkerTokens, error) {
	entries, err := decodeEntries(data, workerEntryKeys)
	if err != nil {
		return nil, err
	}
	wt := &WorkerTokens{byRing: map[lease.RingKey][]namedDigest{}}
	for i, e := range entries {
		if e.Ring == "" {
			return nil, fmt.Errorf("%s: no ring (want ring: REGION/CLUSTER/SERVICE)", e.where(i))
		}
		k, err := lease.ParseRing(e.Ring)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.where(i), err)
		}
		nd, err := parseDigest(i, e)
		if err != nil {
			return nil, err
		}
		wt.byRing[k] = append(wt.byRing[k], nd)
		wt.count++
	}
	return wt, nil
}

// ParseAdminTokens reads an --admin-token-file. An empty file is valid: no admin call is admitted.
func ParseAdminTokens(data []byte) (*AdminTokens, error) {
	entries, err := decodeEntries(data, adminEntryKeys)
	if err != nil {
		return nil, err
	}
	at := &AdminTokens{}
	for i, e := range entries {
		if e.Ring != "" {
			return nil, fmt.Errorf("%s: an admin token has no ring (ring: is for --worker-tokens); entries take %s", e.where(i), adminEntryKeys)
		}
		nd, err := parseDigest(i, e)
		if err != nil {
			return nil, err
		}
		at.tokens = append(at.tokens, nd)
	}
	return at, nil
}

// ParseClusterSecret reads a --cluster-secret-file: the secret alone on one line, a token by
// CheckToken's rules.
func ParseClusterSecret(data []byte) (*ClusterSecret, error) {
	s := strings.TrimSpace(string(data))
	if lines := strings.Count(s, "\n") + 1; lines > 1 {
		return nil, fmt.Errorf("want the secret alone on one line, found %d lines (the same secret on every coordinator; make one with: retryring token new)", lines)
	}
	if err := CheckToken(s); err != nil {
		return nil, fmt.Errorf("the secret: %w (make one with: retryring token new)", err)
	}
	return &ClusterSecret{secret: s, digest: DigestOf(s)}, nil
}

// plural is "1 token", "3 tokens".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
