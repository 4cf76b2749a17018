package authtest

import (
	"os"
	"testing"
)

// ReplaceFile writes content to path by renaming a complete file over it (as a Secret update
// does): a reader sees the old content or the new, never half of it.
func ReplaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
