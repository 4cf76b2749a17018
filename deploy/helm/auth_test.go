package helm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/lease"
	"github.com/retryring/retryring/testkit/cassandratest"
	"github.com/retryring/retryring/testkit/proctest"
)

// authFlags are the coordinator's and the worker's flags of authentication, each naming a file.
var authFlags = map[string][]string{
	"coordinator": {"worker-tokens", "admin-token-file", "cluster-secret-file"},
	"worker":      {"token-file"},
}

// TestChartRequiresAuthentication: the default values render nothing, with one error naming the
// missing values and the commands that make them; so do contradictory settings. The opt-out
// renders pods without a token flag.
func TestChartRequiresAuthentication(t *testing.T) {
	_, err := helmTemplate(t)
	if err == nil {
		t.Fatal("helm template with the default values rendered: a cluster anyone can pause and join; want a refusal naming the missing tokens")
	}
	for _, want := range []string{"auth.workerTokens", "auth.adminTokens", "auth.clusterSecret", "auth.workerToken",
		"retryring token new --ring local/default/orders", "retryring token hash", "kubectl -n retryring create secret generic retryring-auth",
		"auth.existingSecret=retryring-auth", "auth.insecureNoAuthentication=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"one value missing", []string{"auth.workerTokens=x", "auth.adminTokens=x", "auth.clusterSecret=x"}, "auth.workerToken not set"},
		{"a Secret and values", []string{"auth.existingSecret=retryring-auth", "auth.clusterSecret=x"}, "auth.existingSecret (retryring-auth) and auth.clusterSecret are both set"},
		{"the opt-out and a Secret", []string{"auth.existingSecret=retryring-auth", "auth.insecureNoAuthentication=true"}, "auth.insecureNoAuthentication is true and auth.existingSecret set too"},
	} {
		var args []string
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		if _, err := helmTemplate(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}

	// A coordinator-only release needs no worker token.
	if _, err := helmTemplate(t, "--set", "worker.enabled=false", "--set", "auth.workerTokens=x", "--set", "auth.adminTokens=x", "--set", "auth.clusterSecret=x"); err != nil {
		t.Errorf("worker.enabled=false with the coordinators' three values: %v", err)
	}

	ms := render(t, "--set", "auth.insecureNoAuthentication=true")
	for sub, m := range map[string]manifest{"coordinator": find(t, ms, "StatefulSet", "retryring"), "worker": find(t, ms, "Deployment", "retryring-worker")} {
		for _, flag := range authFlags[sub] {
			if v, ok := flagValue(container0(t, m).Args, flag); ok {
				t.Errorf("auth.insecureNoAuthentication: the %s still gets --%s=%s", sub, flag, v)
			}
		}
	}
	for _, m := range ms {
		if m.Kind == "Secret" {
			t.Errorf("auth.insecureNoAuthentication renders Secret %s", m.Metadata.Name)
		}
	}
}

// TestChartAuthSecret: values become the Secret <fullname>-auth, auth.existingSecret replaces it;
// either way each pod mounts only its own keys of it (a worker never sees the coordinators'
// cluster secret, a coordinator never holds a worker's token), and each flag names its key.
// Nothing is generated: two renderings are the same, byte for byte (a GitOps sync changes nothing).
func TestChartAuthSecret(t *testing.T) {
	first, err := helmTemplate(t, withAuth()...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := helmTemplate(t, withAuth()...)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two renderings of the same values differ: something is generated at render time")
	}
	for _, tc := range []struct {
		name, secret string
		args         []string
	}{
		{"values", "retryring-auth", withAuth()},
		{"existingSecret", "my-auth", []string{"--set", "auth.existingSecret=my-auth"}},
	} {
		ms := render(t, tc.args...)
		rendered := slices.ContainsFunc(ms, func(m manifest) bool { return m.Kind == "Secret" && m.Metadata.Name == tc.secret })
		if rendered != (tc.name == "values") {
			t.Errorf("%s: Secret %s rendered: %v", tc.name, tc.secret, rendered)
		}
		if rendered {
			data, _ := find(t, ms, "Secret", tc.secret).raw["stringData"].(map[string]any)
			for _, key := range []string{"worker-tokens.yaml", "admin-tokens.yaml", "cluster-secret", "worker-token"} {
				if s, _ := data[key].(string); s == "" {
					t.Errorf("%s: Secret %s has no %s", tc.name, tc.secret, key)
				}
			}
		}
		for _, w := range []struct {
			m    manifest
			sub  string
			keys []string
		}{
			{find(t, ms, "StatefulSet", "retryring"), "coordinator", []string{"worker-tokens.yaml", "admin-tokens.yaml", "cluster-secret"}},
			{find(t, ms, "Deployment", "retryring-worker"), "worker", []string{"worker-token"}},
		} {
			c := container0(t, w.m)
			if got := mountedKeys(c, w.m.Spec.Template.Spec, tc.secret); !slices.Equal(got, w.keys) {
				t.Errorf("%s: the %s mounts keys %v of Secret %s, want only %v", tc.name, w.sub, got, tc.secret, w.keys)
			}
			want := map[string]string{}
			for i, flag := range authFlags[w.sub] {
				want[flag] = tc.secret + "/" + w.keys[i]
			}
			checkSecretFlags(t, tc.name+": "+w.sub, c.Args, secretFiles(t, c, w.m.Spec.Template.Spec), want)
		}
	}
}

// mountedKeys lists the keys of Secret secret that c sees (all of them: nil).
func mountedKeys(c container, p podSpec, secret string) []string {
	var keys []string
	for _, v := range p.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secret {
			continue
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(vm volumeMount) bool { return vm.Name == v.Name }) {
			continue
		}
		if len(v.Secret.Items) == 0 {
			return nil
		}
		for _, it := range v.Secret.Items {
			keys = append(keys, it.Key)
		}
	}
	return keys
}

// TestChartAuthRecipeWorks runs the commands the refusal prints (docs/operations.md shows the
// same lines), as a newcomer pastes them (the kubectl line is read, not run: its --from-file keys
// make the Secret), installs the chart with the --set it names, and starts a coordinator and a
// worker of the chart's ring with the files where the rendered flags point: the worker is
// admitted, and a mutating ctl call passes with ops.token and is refused without it.
func TestChartAuthRecipeWorks(t *testing.T) {
	_, refusal := helmTemplate(t)
	if refusal == nil {
		t.Fatal("helm template with the default values rendered: want the refusal whose commands this test runs")
	}
	msg := refusal.Error()
	start, end := strings.Index(msg, "Make them:\n"), strings.Index(msg, "\nthen install with --set ")
	if start < 0 || end < start {
		t.Fatalf("the refusal has no block of commands between %q and %q:\n%s", "Make them:", "then install with --set", msg)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secretName := ""
	secretKeys := map[string]string{} // key → file
	for _, line := range strings.Split(msg[start+len("Make them:\n"):end], "\n") {
		line = strings.TrimSpace(line)
		if !strings.Contains(string(doc), "\n"+line+"\n") {
			t.Errorf("docs/operations.md does not show the refusal's command %q", line)
		}
		if fields := strings.Fields(line); len(fields) > 0 && fields[0] == "kubectl" {
			secretName = kubectlSecret(t, fields, secretKeys)
			continue
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	set := strings.Fields(msg[end+len("\nthen install with --set "):])[0]
	set = strings.TrimSuffix(set, ",")
	if set != "auth.existingSecret="+secretName {
		t.Fatalf("the refusal says --set %s, its kubectl line makes Secret %q", set, secretName)
	}

	ms := render(t, "--set", set)
	args := map[string][]string{} // per subcommand: its auth flags, pointing at the recipe's files
	for _, w := range []struct {
		m   manifest
		sub string
	}{{find(t, ms, "StatefulSet", "retryring"), "coordinator"}, {find(t, ms, "Deployment", "retryring-worker"), "worker"}} {
		c := container0(t, w.m)
		for _, key := range mountedKeys(c, w.m.Spec.Template.Spec, secretName) {
			if secretKeys[key] == "" {
				t.Fatalf("the %s mounts key %s of Secret %s, which the recipe's kubectl line does not make (it makes %v)", w.sub, key, secretName, secretKeys)
			}
		}
		mounts := secretFiles(t, c, w.m.Spec.Template.Spec)
		for _, flag := range authFlags[w.sub] {
			v, _ := flagValue(c.Args, flag)
			if mounts[filepath.Dir(v)] != secretName {
				t.Fatalf("the %s's --%s=%s is not in Secret %s", w.sub, flag, v, secretName)
			}
			args[w.sub] = append(args[w.sub], "--"+flag, filepath.Join(dir, secretKeys[filepath.Base(v)]))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := proctest.NewGroup(t)
	cl, err := proc.StartCluster(ctx, g, proc.Options{
		Binary: binary, Coordinators: 1, Workers: 1, Keyspace: cassandratest.NewKeyspace(t),
		Ring:            lease.RingKey{Region: "local", Cluster: "default", Service: "orders"},
		CoordinatorArgs: args["coordinator"], WorkerArgs: args["worker"],
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	if _, err := cl.WaitSettled(ctx); err != nil {
		t.Fatalf("the worker with the recipe's worker-token: %v", err)
	}
	checkAdminToken(ctx, t, cl.Coordinators()[0].URL(""), filepath.Join(dir, "ops.token"))
}

// checkAdminToken: a mutating admin call (ctl cordon of a worker that does not exist) is refused
// without the admin token in tokenFile, and passes the check with it (then fails for the worker).
func checkAdminToken(ctx context.Context, t *testing.T, url, tokenFile string) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "401 Unauthorized"},
		{[]string{"--token-file", tokenFile}, "unknown_worker"},
	} {
		args := append([]string{"ctl", "cordon", "nobody", "--coordinator", url}, tc.args...)
		for {
			out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
			// A new leader acts on admin calls once its lease wait is over: until then no_leader.
			if err != nil && strings.Contains(string(out), "no_leader") && ctx.Err() == nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("retryring %s: %v, %s; want an error with %q", strings.Join(args, " "), err, out, tc.want)
			}
			break
		}
	}
}

// kubectlSecret reads `kubectl -n NS create secret generic NAME --from-file=KEY[=FILE] ...`: it
// records each key's file and returns NAME.
func kubectlSecret(t *testing.T, fields []string, keys map[string]string) string {
	t.Helper()
	i := slices.Index(fields, "generic")
	if i < 0 || i+1 >= len(fields) || !slices.Contains(fields, "create") {
		t.Fatalf("not a `kubectl create secret generic` line: %s", strings.Join(fields, " "))
	}
	for _, f := range fields[i+2:] {
		v, ok := strings.CutPrefix(f, "--from-file=")
		if !ok {
			continue
		}
		key, file, found := strings.Cut(v, "=")
		if !found {
			file = v
			key = filepath.Base(v)
		}
		keys[key] = file
	}
	return fields[i+1]
}
