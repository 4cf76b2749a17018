package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/retryring/retryring/testkit/tlstest"
)

// TestTLSFlagsRefuseBadFilesWithOneLine: a bad TLS file stops the coordinator and the worker at
// start, before anything listens or connects, with one line naming the file.
func TestTLSFlagsRefuseBadFilesWithOneLine(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA("ca")
	caFile := ca.WriteCA(dir, "ca.crt")
	cert, key := ca.Issue(tlstest.Options{}).Write(dir, "c1")
	nope := filepath.Join(dir, "nope.crt")
	run := func(t *testing.T, env map[string]string, args ...string) error {
		for k, v := range env {
			t.Setenv(k, v)
		}
		cmd := newRootCommand()
		cmd.SetArgs(args)
		return cmd.Execute()
	}
	coordinatorArgs := []string{"coordinator", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--rsocket-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing server certificate", nil, append(coordinatorArgs, "--tls-cert", nope, "--tls-key", key), nope},
		{"certificate from the environment", map[string]string{"RETRYRING_TLS_CERT": nope, "RETRYRING_TLS_KEY": key}, coordinatorArgs, nope},
		{"client CA without a certificate", nil, append(coordinatorArgs, "--tls-client-ca", caFile), "--tls-client-ca needs --tls-cert"},
		{"raft CA that is a key", nil, append(coordinatorArgs, "--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", key), "holds no PEM certificate"},
		{"raft certificate alone", nil, append(coordinatorArgs, "--raft-tls-cert", cert), "--raft-tls-ca together"},
		{"worker CA missing", nil, []string{"worker", "--http-addr", "", "--cassandra", "127.0.0.1:1", "--coordinator-ca", nope}, nope},
		{"worker key without certificate", nil, []string{"worker", "--http-addr", "", "--cassandra", "127.0.0.1:1", "--coordinator-key", key}, "a certificate and its key go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line saying %q", err, tc.want)
			}
			t.Logf("retryring: %v", err)
		})
	}
}
