package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retryring/retryring/coordinator/auth"
)

// TestTokenNewAndHash: `token new` prints a token and a line that holds its hash (never the
// token); `token hash` of that token prints the same hash; a bad ring or token is one error line.
func TestTokenNewAndHash(t *testing.T) {
	line, token, err := newTokenLine("eu-west/c1/orders", "orders-2026-12", bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `- {ring: "eu-west/c1/orders", hash: "` + auth.HashToken(token) + `", name: "orders-2026-12"}`; line != want {
		t.Errorf("line %s, want %s", line, want)
	}
	if strings.Contains(line, token) || auth.CheckToken(token) != nil {
		t.Errorf("token %q, line %s", token, line)
	}
	if line, _, _ := newTokenLine("", "", bytes.NewReader(make([]byte, 32))); strings.Contains(line, "ring") {
		t.Errorf("an admin line names a ring: %s", line)
	}
	if _, _, err := newTokenLine("eu-west/orders", "", bytes.NewReader(make([]byte, 32))); err == nil || !strings.Contains(err.Error(), "--ring") {
		t.Errorf("a ring of two names: %v", err)
	}

	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetIn(strings.NewReader(token + "\n"))
	cmd.SetArgs([]string{"token", "hash"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != auth.HashToken(token) {
		t.Errorf("token hash printed %q", got)
	}
	cmd.SetIn(strings.NewReader("short\n"))
	if err := cmd.Execute(); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a short token: %v", err)
	}
}

// TestWorkerTokenFrom: --token-file wins over RETRYRING_TOKEN, neither means no token, and a
// missing file or a malformed token is an error naming where it came from.
func TestWorkerTokenFrom(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-the-file-0000000001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == "RETRYRING_TOKEN" && v != "" }
	}
	for _, c := range []struct {
		file, env, want, err string
	}{
		{file, "from-the-environment-0001", "from-the-file-0000000001", ""},
		{"", "from-the-environment-0001", "from-the-environment-0001", ""},
		{"", "", "", ""},
		{filepath.Join(dir, "none"), "", "", "--token-file"},
		{"", "has a space in it 000000", "", "RETRYRING_TOKEN"},
	} {
		got, err := workerTokenFrom(c.file, env(c.env))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: error %v, want one naming %s", c, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%+v: %q, %v", c, got, err)
		}
	}
}

// TestTokenNewWritesFiles: --out writes the token alone to a new file of mode 0600 and refuses an
// existing one (which may hold a token in use) without touching the tokens file; --append-to adds
// the line and keeps what the file held.
func TestTokenNewWritesFiles(t *testing.T) {
	dir := t.TempDir()
	out, lines := filepath.Join(dir, "orders.token"), filepath.Join(dir, "worker-tokens.yaml")
	if err := os.WriteFile(lines, []byte("- {hash: \"sha256:00\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		root := newRootCommand()
		var b bytes.Buffer
		root.SetOut(&b)
		root.SetErr(&b)
		root.SetArgs(append([]string{"token", "new"}, args...))
		err := root.ExecuteContext(context.Background())
		return b.String(), err
	}
	printed, err := run("--ring", "eu/prod/orders", "--out", out, "--append-to", lines)
	if err != nil {
		t.Fatal(err)
	}
	if printed != "# token written to "+out+" (mode 0600)\n# line appended to "+lines+"\n" {
		t.Errorf("printed %q", printed)
	}
	tokenFile, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenFile))
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 || auth.CheckToken(token) != nil {
		t.Errorf("--out file mode %v, content %q", st.Mode().Perm(), tokenFile)
	}
	want := "- {hash: \"sha256:00\"}\n- {ring: \"eu/prod/orders\", hash: \"" + auth.HashToken(token) + "\"}\n"
	if got, _ := os.ReadFile(lines); string(got) != want {
		t.Errorf("tokens file:\n%s\nwant\n%s", got, want)
	}

	_, err = run("--out", out, "--append-to", lines)
	if err == nil || err.Error() != "--out "+out+" exists: it may hold a token in use; remove it or name a new file" {
		t.Errorf("an existing --out: %v", err)
	}
	if got, _ := os.ReadFile(out); string(got) != string(tokenFile) {
		t.Error("the refused --out changed the file")
	}
	if got, _ := os.ReadFile(lines); string(got) != want {
		t.Error("a refused --out still appended a line")
	}
	if _, err := run("--out", lines, "--append-to", lines); err == nil || !strings.Contains(err.Error(), "name the same file") {
		t.Errorf("--out and --append-to the same file: %v", err)
	}
}
