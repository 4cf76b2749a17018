package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The ldflags win; without them the module's build information gives the version and the VCS
// revision (marked dirty when the tree had changes); without either, "unknown".
func TestVersionSources(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	read := func() (*debug.BuildInfo, bool) { return info, true }
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for name, tc := range map[string]struct {
		ver, rev string
		read     func() (*debug.BuildInfo, bool)
		want     buildVersion
	}{
		"ldflags":    {"v2.0.0-3-gdeadbee", "deadbeef", read, buildVersion{"v2.0.0-3-gdeadbee", "deadbeef", "go1.26.0"}},
		"build info": {"", "", read, buildVersion{"v1.2.3", "abc123-dirty", "go1.26.0"}},
		"nothing":    {"", "", none, buildVersion{"unknown", "unknown", runtime.Version()}},
	} {
		if got := versionFrom(tc.ver, tc.rev, tc.read); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// `retryring version`, `retryring version -o json` and `retryring --version` print the same.
func TestVersionCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	want := currentVersion()
	text, err := run("version")
	if err != nil || strings.TrimSpace(text) != want.String() || !strings.Contains(text, want.GoVersion) {
		t.Fatalf("version: %q (%v)", text, err)
	}
	flag, err := run("--version")
	if err != nil || flag != text {
		t.Fatalf("--version: %q (%v), want %q", flag, err, text)
	}
	js, err := run("version", "-o", "json")
	var got buildVersion
	if err != nil || json.Unmarshal([]byte(js), &got) != nil || got != want {
		t.Fatalf("version -o json: %q (%v)", js, err)
	}
	if _, err := run("version", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), `want text or json, got "yaml"`) {
		t.Fatalf("version -o yaml: %v", err)
	}
}
