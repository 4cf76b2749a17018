package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// subcommand returns the command at path in a fresh command tree, its flags parsed from args
// (which merges the root's persistent flags, --config among them, into its flag set).
func subcommand(t *testing.T, args []string, path ...string) *cobra.Command {
	t.Helper()
	cmd, _, err := newRootCommand().Find(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "retryring.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func flagValue(t *testing.T, cmd *cobra.Command, name string) string {
	t.Helper()
	f := cmd.Flags().Lookup(name)
	if f == nil {
		t.Fatalf("no flag --%s", name)
	}
	return f.Value.String()
}

// Flags win over the environment, the environment over the file, the file over the defaults; in
// the file a subcommand's section wins over the top level, and the top level serves every
// subcommand that has the flag.
func TestConfigPrecedence(t *testing.T) {
	path := writeConfig(t, `
log-level: warn
lease-ttl: 7s
node-id: flat
coordinator:
  node-id: c2
  raft-addr: 10.0.0.2:7400
  lease-renewal: 1500ms
  peers: c1=10.0.0.1:7400,c2=10.0.0.2:7400
ctl:
  coordinator: http://10.0.0.9:7480
  impl: [payment, email]
`)
	env := map[string]string{"RETRYRING_RAFT_ADDR": "10.0.0.3:7400"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := subcommand(t, []string{"--config", path, "--lease-renewal", "1s"}, "coordinator")
	if err := bindEnv(cmd, lookup); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"node-id":       "c2",             // the section over the top level
		"raft-addr":     "10.0.0.3:7400",  // the environment over the file
		"lease-renewal": "1s",             // the command line over the file
		"lease-ttl":     "7s",             // the top level
		"log-level":     "warn",           // the top level, a flag of every command
		"http-addr":     "127.0.0.1:7480", // the default
		"peers":         "c1=10.0.0.1:7400,c2=10.0.0.2:7400",
	} {
		if got := flagValue(t, cmd, name); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	if !flagGiven(cmd, "lease-ttl") || !flagGiven(cmd, "raft-addr") || flagGiven(cmd, "http-addr") {
		t.Errorf("flagGiven: lease-ttl %v raft-addr %v http-addr %v", flagGiven(cmd, "lease-ttl"), flagGiven(cmd, "raft-addr"), flagGiven(cmd, "http-addr"))
	}

	// The ctl section serves ctl's subcommands; a list fills a flag that takes several values.
	pause := subcommand(t, []string{"--config", path}, "ctl", "pause")
	if err := bindEnv(pause, lookup); err != nil {
		t.Fatal(err)
	}
	if got := flagValue(t, pause, "coordinator"); got != "http://10.0.0.9:7480" {
		t.Errorf("ctl pause --coordinator = %q", got)
	}
	if got := flagValue(t, pause, "impl"); got != "[payment,email]" {
		t.Errorf("ctl pause --impl = %q", got)
	}

	// RETRYRING_CONFIG names the file too.
	env = map[string]string{"RETRYRING_CONFIG": path}
	status := subcommand(t, nil, "ctl", "status")
	if err := bindEnv(status, lookup); err != nil {
		t.Fatal(err)
	}
	if got := flagValue(t, status, "coordinator"); got != "http://10.0.0.9:7480" {
		t.Errorf("ctl status --coordinator from RETRYRING_CONFIG = %q", got)
	}
}

// Every malformed file is one error line naming the file, the line and the key, whichever
// subcommand runs (a file shared by several is checked whole).
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", "log-level: info\nnode-idd: c1\n", `line 2: unknown key "node-idd": no retryring command has a flag --node-idd`},
		{"unknown section key", "worker:\n  concurrency: 4\n  node-id: c1\n", `line 3: unknown key "node-id" in section "worker": retryring worker has no flag --node-id`},
		{"unknown section", "workers:\n  concurrency: 4\n", `line 1: unknown section "workers"`},
		{"wrong type in another section", "worker:\n  concurrency: many\n", `line 2: key "worker.concurrency": "many" is not a valid int: invalid syntax`},
		{"wrong duration", "lease-ttl: 10\n", `line 1: key "lease-ttl": "10" is not a valid duration`},
		{"wrong bool", "coordinator:\n  unsafe-no-sync: maybe\n", `line 2: key "coordinator.unsafe-no-sync": "maybe" is not a valid bool`},
		{"list for one value", "coordinator:\n  node-id: [c1, c2]\n", `line 2: key "coordinator.node-id": --node-id takes one value, not a list`},
		{"mapping for a value", "coordinator:\n  node-id: {a: 1}\n", `line 2: key "coordinator.node-id": want a value or a list of values, got a mapping`},
		{"null value", "coordinator:\n  node-id:\n", `line 2: key "coordinator.node-id": no value`},
		{"twice", "log-level: info\nlog-level: warn\n", `line 2: key "log-level" given twice`},
		{"not a mapping", "- log-level\n", "line 1: want a mapping of flag names to values"},
		{"syntax", "log-level: [info\n", "config "},
		{"two documents", "log-level: info\n---\nlog-level: warn\n", "line 2: want one YAML document"},
		{"config in config", "config: other.yaml\n", `line 1: key "config": a config file cannot name another config file`},
	} {
		path := writeConfig(t, tc.body)
		cmd := subcommand(t, []string{"--config", path}, "ctl", "status")
		err := bindEnv(cmd, func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config "+path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s and %q", tc.name, err, path, tc.want)
		}
	}
	cmd := subcommand(t, []string{"--config", "/nonexistent/retryring.yaml"}, "ctl", "status")
	if err := bindEnv(cmd, func(string) (string, bool) { return "", false }); err == nil ||
		err.Error() != "config /nonexistent/retryring.yaml: no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
	// An empty file sets nothing.
	cmd = subcommand(t, []string{"--config", writeConfig(t, "# nothing yet\n")}, "ctl", "status")
	if err := bindEnv(cmd, func(string) (string, bool) { return "", false }); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

// The whole path: `retryring ctl status --config FILE` reaches the coordinator the file names.
func TestConfigDrivesACommand(t *testing.T) {
	addr := startCoordinator(t)
	path := writeConfig(t, "ctl:\n  coordinator: "+addr+"\n  output: json\n")
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := ctl(t, "status", "--config", path)
		if err == nil && strings.HasPrefix(out, `{"node":{"id":"c1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl status --config: %q (%v)", out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A flag on the command line still wins.
	if _, err := ctl(t, "status", "--config", path, "--coordinator", "http://127.0.0.1:1"); err == nil ||
		!strings.Contains(err.Error(), "unreachable at http://127.0.0.1:1") {
		t.Fatalf("--coordinator over the file: %v", err)
	}
}

// FuzzConfig: no file makes the parser or the check against the command tree panic, and a file
// they accept is applied to a command without a panic.
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		"log-level: info\n",
		"coordinator:\n  node-id: c1\n  lease-ttl: 10s\nctl:\n  impl: [a, b]\n",
		"worker: {concurrency: 4}\n",
		"a: &x 1\nb: *x\n",
		"- 1\n- 2\n",
		"coordinator:\n  node-id:\n",
		"",
		"{",
	} {
		f.Add([]byte(seed))
	}
	root := newRootCommand()
	status, _, _ := root.Find([]string{"coordinator"})
	_ = status.ParseFlags(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := parseConfig("fuzz.yaml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if err := cf.check(root); err != nil {
			return
		}
		_ = cf.apply(status, func(*pflag.Flag) bool { return false })
	})
}
