package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	podDomain = "retryring-headless.retryring.svc.cluster.local"
	tlsValues = "ci/tls-values.yaml"
	// authValues are the default values plus the authentication the chart requires.
	authValues = "ci/auth-values.yaml"
	// authValuesAdminToken is the admin token whose hash ci/auth-values.yaml holds.
	authValuesAdminToken = "4ee7d3467ae4c0f3515ca6bbc1876de8997f42abfd77b2077c05df457e7c656b"
)

// withAuth prepends -f ci/auth-values.yaml to extra: the values every rendering needs that is
// not about authentication itself.
func withAuth(extra ...string) []string {
	return append([]string{"-f", filepath.Join(chartDir(), authValues)}, extra...)
}

// agreedFlags are the flags of issue 10 that other parts add to the binary: the chart renders
// them by these names, only when their values are set. Once they exist in the binary this list
// only repeats what `--help` says.
var agreedFlags = map[string][]string{
	"coordinator": {"tls-cert", "tls-key", "tls-client-ca", "raft-tls-cert", "raft-tls-key", "raft-tls-ca",
		"worker-tokens", "admin-token-file", "cluster-secret-file", "max-connections", "max-setups-per-second",
		"max-streams-per-ring", "join"},
	"worker": {"coordinator-ca", "coordinator-cert", "coordinator-key", "token-file", "cassandra-ca",
		"cassandra-cert", "cassandra-key", "cassandra-server-name", "cassandra-username", "cassandra-password-file"},
}

var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

// binaryFlags lists the flags `retryring <sub> --help` shows; sub may name a nested command
// ("schema apply").
func binaryFlags(t *testing.T, sub string) map[string]bool {
	t.Helper()
	out, err := exec.Command(binary, append(strings.Fields(sub), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s --help: %v\n%s", binary, sub, err, out)
	}
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 5 {
		t.Fatalf("%s %s --help: found only %v", binary, sub, flags)
	}
	return flags
}

// checkFlags: every --flag of args is one the binary has, or (allowAgreed) one of issue 10's
// agreed names; args[0] is the subcommand.
func checkFlags(t *testing.T, args []string, allowAgreed bool) {
	t.Helper()
	sub := args[0]
	known := binaryFlags(t, sub)
	for _, a := range args[1:] {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s arg %q is not --flag=value", sub, a)
			continue
		}
		if known[name] || allowAgreed && slices.Contains(agreedFlags[sub], name) {
			continue
		}
		t.Errorf("%s arg %q: no such flag in `retryring %s --help`", sub, a, sub)
	}
}

func container0(t *testing.T, m manifest) container {
	t.Helper()
	if n := len(m.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s %s: %d containers, want 1", m.Kind, m.Metadata.Name, n)
	}
	return m.Spec.Template.Spec.Containers[0]
}

// subset reports whether every label of sel is on labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func portNamed(c container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// checkProbe: an HTTP GET of path on the named container port, with scheme.
func checkProbe(t *testing.T, what string, p *probe, path, port, scheme string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no httpGet probe", what)
		return
	}
	if p.HTTPGet.Path != path || fmt.Sprint(p.HTTPGet.Port) != port || p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != scheme {
		t.Errorf("%s: probe %s on %v (%s), want %s on %s (%s)", what, p.HTTPGet.Path, p.HTTPGet.Port, p.HTTPGet.Scheme, path, port, scheme)
	}
}

// TestChartDefaults renders the default values and checks what a cluster would run: the
// coordinator StatefulSet (3 voters, parallel, headless service, PVC, node id and advertised
// names from the pod name, peers by DNS name, probes), both Services, the PDB, the worker
// Deployment and the dashboard ConfigMap; every flag exists in the binary.
func TestChartDefaults(t *testing.T) {
	ms := render(t, withAuth()...)

	sts := find(t, ms, "StatefulSet", "retryring")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %v, want 3", sts.Spec.Replicas)
	}
	if sts.Spec.ServiceName != "retryring-headless" || sts.Spec.PodManagementPolicy != "Parallel" {
		t.Errorf("StatefulSet serviceName %q, podManagementPolicy %q", sts.Spec.ServiceName, sts.Spec.PodManagementPolicy)
	}
	podLabels := sts.Spec.Template.Metadata.Labels
	if !subset(sts.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector.MatchLabels, podLabels)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Metadata.Name != "data" {
		t.Errorf("StatefulSet volumeClaimTemplates %+v, want one named data", sts.Spec.VolumeClaimTemplates)
	}
	if g := sts.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 10 {
		t.Errorf("coordinator terminationGracePeriodSeconds %v: too short for a leadership handover", g)
	}
	c := container0(t, sts)
	checkFlags(t, c.Args, false)
	for name, port := range map[string]int{"raft": 7400, "rsocket": 7878, "http": 7480} {
		if got := portNamed(c, name); got != port {
			t.Errorf("coordinator port %s = %d, want %d", name, got, port)
		}
	}
	checkProbe(t, "coordinator readiness", c.ReadinessProbe, "/readyz", "http", "HTTP")
	checkProbe(t, "coordinator liveness", c.LivenessProbe, "/healthz", "http", "HTTP")
	dataMounted := false
	for _, vm := range c.VolumeMounts {
		if vm.Name == "data" && vm.MountPath == "/var/lib/retryring" {
			dataMounted = true
		}
	}
	if !dataMounted {
		t.Errorf("coordinator mounts %+v: no data volume at /var/lib/retryring", c.VolumeMounts)
	}

	// What pod retryring-1 runs.
	args, env, err := pod{Name: "retryring-1", IP: "10.1.2.3"}.command(c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "POD_NAME=retryring-1") {
		t.Errorf("coordinator env %v: no POD_NAME from the pod's name", env)
	}
	wantPeers := "retryring-0=retryring-0." + podDomain + ":7400," +
		"retryring-1=retryring-1." + podDomain + ":7400," +
		"retryring-2=retryring-2." + podDomain + ":7400"
	for flag, want := range map[string]string{
		"node-id":           "retryring-1",
		"peers":             wantPeers,
		"raft-advertise":    "retryring-1." + podDomain + ":7400",
		"rsocket-advertise": "retryring-1." + podDomain + ":7878",
		"http-advertise":    "retryring-1." + podDomain + ":7480",
		"raft-addr":         ":7400",
		"rsocket-addr":      ":7878",
		"http-addr":         ":7480",
		"data-dir":          "/var/lib/retryring/raft",
	} {
		if got, _ := flagValue(args, flag); got != want {
			t.Errorf("retryring-1 --%s=%q, want %q", flag, got, want)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "tls") || strings.Contains(a, "join") {
			t.Errorf("default values render %q: TLS needs Secrets the operator makes, and --join is for scaling", a)
		}
	}

	headless := find(t, ms, "Service", "retryring-headless")
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReady {
		t.Errorf("headless Service clusterIP %q publishNotReadyAddresses %v", headless.Spec.ClusterIP, headless.Spec.PublishNotReady)
	}
	client := find(t, ms, "Service", "retryring")
	for _, svc := range []manifest{headless, client} {
		if !subset(svc.Spec.ServiceSelector, podLabels) {
			t.Errorf("Service %s selector %v does not select the coordinators %v", svc.Metadata.Name, svc.Spec.ServiceSelector, podLabels)
		}
		for _, p := range svc.Spec.Ports {
			if fmt.Sprint(p.TargetPort) != p.Name || portNamed(c, p.Name) != p.Port {
				t.Errorf("Service %s port %+v does not match the container's %s port", svc.Metadata.Name, p, p.Name)
			}
		}
	}
	portNames := func(svc manifest) []string {
		var out []string
		for _, p := range svc.Spec.Ports {
			out = append(out, p.Name)
		}
		return out
	}
	if got := portNames(headless); !slices.Equal(got, []string{"raft", "rsocket", "http"}) {
		t.Errorf("headless Service ports %v", got)
	}
	if got := portNames(client); !slices.Equal(got, []string{"rsocket", "http"}) {
		t.Errorf("client Service ports %v", got)
	}

	pdb := find(t, ms, "PodDisruptionBudget", "retryring")
	if fmt.Sprint(pdb.Spec.MaxUnavailable) != "1" || !subset(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PDB maxUnavailable %v selector %v", pdb.Spec.MaxUnavailable, pdb.Spec.Selector.MatchLabels)
	}

	dep := find(t, ms, "Deployment", "retryring-worker")
	if subset(dep.Spec.Selector.MatchLabels, podLabels) || subset(sts.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels) {
		t.Errorf("worker and coordinator selectors overlap: %v, %v", dep.Spec.Selector.MatchLabels, sts.Spec.Selector.MatchLabels)
	}
	w := container0(t, dep)
	checkFlags(t, w.Args, false)
	wargs, _, err := pod{Name: "retryring-worker-7d9f-abcde", IP: "10.1.2.4"}.command(w)
	if err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"worker-id":    "retryring-worker-7d9f-abcde",
		"coordinators": "retryring.retryring.svc.cluster.local:7878",
		"http-addr":    ":7580",
	} {
		if got, _ := flagValue(wargs, flag); got != want {
			t.Errorf("worker --%s=%q, want %q", flag, got, want)
		}
	}
	checkProbe(t, "worker readiness", w.ReadinessProbe, "/readyz", "http", "HTTP")
	checkProbe(t, "worker liveness", w.LivenessProbe, "/healthz", "http", "HTTP")
	if g := dep.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("worker terminationGracePeriodSeconds %v: below exec timeout + shutdown timeout", g)
	}

	cm := find(t, ms, "ConfigMap", "retryring-dashboard")
	want, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "retryring.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Labels["grafana_dashboard"] != "1" || cm.Data["retryring.json"] != strings.TrimSpace(string(want)) {
		t.Errorf("dashboard ConfigMap labels %v, data differs from dashboards/retryring.json: %v",
			cm.Metadata.Labels, cm.Data["retryring.json"] != strings.TrimSpace(string(want)))
	}
	if !json.Valid([]byte(cm.Data["retryring.json"])) {
		t.Error("dashboard ConfigMap holds invalid JSON")
	}
	for _, m := range ms {
		if m.Kind == "PrometheusRule" {
			t.Error("PrometheusRule rendered by default: it needs the Prometheus Operator's CRD")
		}
	}
}

// secretFiles maps each mount path of c to the Secret mounted there (volumes of p).
func secretFiles(t *testing.T, c container, p podSpec) map[string]string {
	t.Helper()
	secretOf := map[string]string{}
	for _, v := range p.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	out := map[string]string{}
	for _, vm := range c.VolumeMounts {
		s, ok := secretOf[vm.Name]
		if !ok {
			continue
		}
		if !vm.ReadOnly || vm.SubPath != "" {
			t.Errorf("Secret %s mounted at %s: readOnly %v subPath %q (a subPath mount never sees an updated Secret)", s, vm.MountPath, vm.ReadOnly, vm.SubPath)
		}
		out[vm.MountPath] = s
	}
	return out
}

// checkSecretFlags: each flag names a file in the directory where the named Secret is mounted.
func checkSecretFlags(t *testing.T, what string, args []string, mounts map[string]string, want map[string]string) {
	t.Helper()
	for flag, secretFile := range want {
		secret, file, _ := strings.Cut(secretFile, "/")
		v, ok := flagValue(args, flag)
		if !ok {
			t.Errorf("%s: no --%s", what, flag)
			continue
		}
		if got := mounts[filepath.Dir(v)]; got != secret || filepath.Base(v) != file {
			t.Errorf("%s: --%s=%s is not key %s of Secret %s (mounted there: %q)", what, flag, v, file, secret, got)
		}
	}
}

// TestChartTLS renders ci/tls-values.yaml (every TLS, token and limit option set) and checks that
// each agreed flag is rendered and names a key of the right Secret, mounted read-only as a
// directory; probes speak HTTPS; the alert rules are rendered.
func TestChartTLS(t *testing.T) {
	ms := render(t, "-f", filepath.Join(chartDir(), tlsValues))

	sts := find(t, ms, "StatefulSet", "retryring")
	c := container0(t, sts)
	checkFlags(t, c.Args, true)
	checkProbe(t, "coordinator readiness", c.ReadinessProbe, "/readyz", "http", "HTTPS")
	checkProbe(t, "coordinator liveness", c.LivenessProbe, "/healthz", "http", "HTTPS")
	checkSecretFlags(t, "coordinator", c.Args, secretFiles(t, c, sts.Spec.Template.Spec), map[string]string{
		"tls-cert":            "retryring-tls/tls.crt",
		"tls-key":             "retryring-tls/tls.key",
		"tls-client-ca":       "retryring-worker-ca/ca.crt",
		"raft-tls-cert":       "retryring-raft-tls/tls.crt",
		"raft-tls-key":        "retryring-raft-tls/tls.key",
		"raft-tls-ca":         "retryring-raft-tls/ca.crt",
		"worker-tokens":       "retryring-auth/worker-tokens.yaml",
		"admin-token-file":    "retryring-auth/admin-tokens.yaml",
		"cluster-secret-file": "retryring-auth/cluster-secret",
	})
	for flag, want := range map[string]string{
		"max-connections": "2000", "max-setups-per-second": "500", "max-streams-per-ring": "1000",
		"lease-ttl": "10s", "lease-renewal": "2s", "raft-heartbeat-timeout": "500ms",
		"raft-election-timeout": "500ms", "raft-leader-lease-timeout": "250ms",
	} {
		if got, _ := flagValue(c.Args, flag); got != want {
			t.Errorf("coordinator --%s=%q, want %q", flag, got, want)
		}
	}

	dep := find(t, ms, "Deployment", "retryring-worker")
	w := container0(t, dep)
	checkFlags(t, w.Args, true)
	checkSecretFlags(t, "worker", w.Args, secretFiles(t, w, dep.Spec.Template.Spec), map[string]string{
		"token-file":              "retryring-auth/worker-token",
		"coordinator-ca":          "retryring-coordinator-ca/ca.crt",
		"coordinator-cert":        "retryring-worker-orders-cert/tls.crt",
		"coordinator-key":         "retryring-worker-orders-cert/tls.key",
		"cassandra-ca":            "cassandra-ca/ca.crt",
		"cassandra-cert":          "cassandra-client-cert/tls.crt",
		"cassandra-key":           "cassandra-client-cert/tls.key",
		"cassandra-password-file": "cassandra-password/password",
	})
	for flag, want := range map[string]string{
		"cassandra-server-name": "cassandra.db.svc", "cassandra-username": "retryring", "local-dc": "dc1",
	} {
		if got, _ := flagValue(w.Args, flag); got != want {
			t.Errorf("worker --%s=%q, want %q", flag, got, want)
		}
	}
	for _, e := range w.Env {
		if strings.Contains(strings.ToLower(e.Name), "password") && e.Value != "" {
			t.Errorf("worker env %s carries a password in the manifest", e.Name)
		}
	}

	rule := find(t, ms, "PrometheusRule", "retryring")
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("rule group %s: a rule without alert or expr: %+v", g.Name, r)
			}
			alerts++
		}
	}
	if alerts < 5 {
		t.Errorf("PrometheusRule has %d alerts", alerts)
	}
}

// TestChartJoin: with coordinator.join set the pods start with --join and without --peers (a node
// that joins never bootstraps a cluster of its own).
func TestChartJoin(t *testing.T) {
	ms := render(t, withAuth("--set", "coordinator.join=retryring.retryring.svc.cluster.local:7480", "--set", "coordinator.replicas=5")...)
	c := container0(t, find(t, ms, "StatefulSet", "retryring"))
	checkFlags(t, c.Args, true)
	if v, ok := flagValue(c.Args, "join"); !ok || v != "retryring.retryring.svc.cluster.local:7480" {
		t.Errorf("--join=%q (%v)", v, ok)
	}
	if v, ok := flagValue(c.Args, "peers"); ok {
		t.Errorf("--peers=%s rendered beside --join", v)
	}
	// Without --peers the Raft address a joining pod gives the leader is --raft-advertise: the
	// bound :7400 would be dialled by nobody.
	if v, _ := flagValue(c.Args, "raft-advertise"); v != "$(POD_NAME)."+podDomain+":7400" {
		t.Errorf("--raft-advertise=%q, want the pod's DNS name", v)
	}
}

// TestChartRefusesBadValues: the values schema turns a misspelt key or a wrongly typed value into
// one error naming it, before anything is rendered.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"coordinator.tsl.secretName=x", "tsl"},
		{"coordinator.lease.ttl=10", "/coordinator/lease/ttl"},
		{"coordinator.lease.ttl=ten", "/coordinator/lease/ttl"},
		{"coordinator.replicas=0", "/coordinator/replicas"},
		{"worker.cassandra.consistency=MOST", "/worker/cassandra/consistency"},
		{"coordinator.tls.secretName=Not_A_Name", "/coordinator/tls/secretName"},
		{"coordinator.replicas=2", "/coordinator/replicas': value must be one of 3, 5, 7, 9"},
		{"coordinator.replicas=4", "/coordinator/replicas': value must be one of 3, 5, 7, 9"},
		{"coordinator.workerTokensSecret=tokens", "'workerTokensSecret' not allowed"},
		{"schema.replication=three", "/schema/replication"},
	} {
		_, err := helmTemplate(t, withAuth("--set", tc.set)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: error %v, want one naming %s", tc.set, err, tc.want)
		}
	}
}

// TestExpand checks the emulation of the kubelet's $(VAR) expansion the process test relies on.
func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_NAME": "retryring-0", "POD_IP": "10.0.0.7"}
	for in, want := range map[string]string{
		"--node-id=$(POD_NAME)":     "--node-id=retryring-0",
		"$(POD_IP):7400":            "10.0.0.7:7400",
		"$(UNDEFINED)":              "$(UNDEFINED)",
		"$$(POD_NAME)":              "$(POD_NAME)",
		"a$b":                       "a$b",
		"$(POD_NAME).x.$(POD_NAME)": "retryring-0.x.retryring-0",
		"$(POD_NAME":                "$(POD_NAME",
		"":                          "",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestChartLargeNumbers: helm reads numbers as float64; a large limit still renders as an integer
// flag the binary parses (1000000, not 1e+06), and a fractional rate stays fractional.
func TestChartLargeNumbers(t *testing.T) {
	// From a values file (not --set, which reads integers as int64), as an operator gives them.
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`coordinator:
  limits:
    maxConnections: 1000000
    maxStreamsPerRing: 2000000
    maxSetupsPerSecond: 0.5
worker:
  concurrency: 1000000
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ms := render(t, withAuth("-f", values)...)
	c := container0(t, find(t, ms, "StatefulSet", "retryring"))
	w := container0(t, find(t, ms, "Deployment", "retryring-worker"))
	for _, tc := range []struct {
		args       []string
		flag, want string
	}{
		{c.Args, "max-connections", "1000000"},
		{c.Args, "max-streams-per-ring", "2000000"},
		{c.Args, "max-setups-per-second", "0.5"},
		{w.Args, "concurrency", "1000000"},
	} {
		if got, _ := flagValue(tc.args, tc.flag); got != tc.want {
			t.Errorf("--%s=%q, want %q", tc.flag, got, tc.want)
		}
	}
	ms = render(t, withAuth("--set-json", "coordinator.limits.maxSetupsPerSecond=3000000.0")...)
	if got, _ := flagValue(container0(t, find(t, ms, "StatefulSet", "retryring")).Args, "max-setups-per-second"); got != "3000000" {
		t.Errorf("--max-setups-per-second=%q, want 3000000", got)
	}
}
