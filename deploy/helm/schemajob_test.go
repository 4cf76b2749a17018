package helm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/testkit/cassandratest"
)

// schemaJob returns the rendered schema Job and its container's args after `schema apply`.
func schemaJob(t *testing.T, ms []manifest) (manifest, container, []string) {
	t.Helper()
	job := find(t, ms, "Job", "retryring-schema")
	c := container0(t, job)
	if len(c.Args) < 2 || c.Args[0] != "schema" || c.Args[1] != "apply" {
		t.Fatalf("the schema Job runs %v, want schema apply ...", c.Args)
	}
	return job, c, c.Args[2:]
}

// cassandraFlags are the worker's flags that say which Cassandra, keyspace and TLS the schema
// Job must use too.
var cassandraFlags = []string{"cassandra", "keyspace", "consistency", "local-dc", "cassandra-ca", "cassandra-cert",
	"cassandra-key", "cassandra-server-name"}

// TestChartSchemaJob: by default a pre-install and pre-upgrade hook Job runs `retryring schema
// apply` against the workers' Cassandra, keyspace and TLS, with the replication of the values,
// bounded in tries and time, deleted once it succeeded and replaced at the next attempt; with
// schema.auth it logs in as the role that may create the keyspace. schema.apply=false, or a
// release without workers, renders none.
func TestChartSchemaJob(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		args                      []string
		replication, user, passwd string
	}{
		{"defaults", withAuth(), "3", "", ""},
		{"tls", []string{"-f", filepath.Join(chartDir(), tlsValues)}, "dc1=3,dc2=3", "retryring_admin", "cassandra-admin-password/password"},
	} {
		ms := render(t, tc.args...)
		job, c, args := schemaJob(t, ms)
		ann := job.Metadata.Annotations
		if ann["helm.sh/hook"] != "pre-install,pre-upgrade" || ann["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s: schema Job annotations %v: want a pre-install,pre-upgrade hook deleted before the next and once it succeeded", tc.name, ann)
		}
		jobSpec, _ := job.raw["spec"].(map[string]any)
		for _, field := range []string{"backoffLimit", "activeDeadlineSeconds"} {
			if n, ok := jobSpec[field].(int); !ok || n <= 0 {
				t.Errorf("%s: schema Job %s = %v", tc.name, field, jobSpec[field])
			}
		}
		checkFlags(t, append([]string{"schema apply"}, args...), false)
		if got, _ := flagValue(args, "replication"); got != tc.replication {
			t.Errorf("%s: --replication=%q, want %q", tc.name, got, tc.replication)
		}
		w := container0(t, find(t, ms, "Deployment", "retryring-worker"))
		for _, flag := range cassandraFlags {
			wv, wok := flagValue(w.Args, flag)
			jv, jok := flagValue(args, flag)
			if wv != jv || wok != jok {
				t.Errorf("%s: the worker has --%s=%q (%v), the schema Job --%s=%q (%v)", tc.name, flag, wv, wok, flag, jv, jok)
			}
		}
		if tc.user != "" {
			if got, _ := flagValue(args, "cassandra-username"); got != tc.user {
				t.Errorf("%s: schema Job --cassandra-username=%q, want %q", tc.name, got, tc.user)
			}
			want := map[string]string{"cassandra-password-file": tc.passwd, "cassandra-ca": "cassandra-ca/ca.crt",
				"cassandra-cert": "cassandra-client-cert/tls.crt", "cassandra-key": "cassandra-client-cert/tls.key"}
			checkSecretFlags(t, tc.name+": schema Job", args, secretFiles(t, c, job.Spec.Template.Spec), want)
		}
	}
	for _, set := range []string{"schema.apply=false", "worker.enabled=false"} {
		ms := render(t, withAuth("--set", set)...)
		if slices.ContainsFunc(ms, func(m manifest) bool { return m.Kind == "Job" }) {
			t.Errorf("--set %s renders a schema Job", set)
		}
	}
}

// TestSchemaJobAppliesIdempotently runs the rendered Job's command twice, as the pre-install and
// a pre-upgrade hook do, against the test Cassandra (its hosts and a fresh keyspace given as
// values, replication 1 for the single node): both runs succeed, and the keyspace holds the
// directory's tables.
func TestSchemaJobAppliesIdempotently(t *testing.T) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	ks := "t_chart_schema_job_" + hex.EncodeToString(rnd[:])
	session := cassandratest.Session(t)
	t.Cleanup(func() {
		if err := session.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
			t.Errorf("drop keyspace %s: %v", ks, err)
		}
	})
	ms := render(t, withAuth("--set", "worker.cassandra.hosts="+cassandratest.Addr(), "--set", "worker.cassandra.keyspace="+ks,
		"--set", "schema.replication=1")...)
	_, _, args := schemaJob(t, ms)
	for run := 1; run <= 2; run++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, binary, append([]string{"schema", "apply"}, args...)...).CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "schema applied to keyspace "+ks) {
			t.Fatalf("run %d of the schema Job's command: %v\n%s", run, err, out)
		}
	}
	var tables []string
	iter := session.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", ks).Iter()
	var name string
	for iter.Scan(&name) {
		tables = append(tables, name)
	}
	if err := iter.Close(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"es_days_by_year", "es_retry_windows_by_day", "es_instances_by_retry_window",
		"es_buckets_by_instance", "es_retry_transactions_by_instance", "es_execution_markers"} {
		if !slices.Contains(tables, want) {
			t.Errorf("keyspace %s after the Job's runs has tables %v: no %s", ks, tables, want)
		}
	}
}
