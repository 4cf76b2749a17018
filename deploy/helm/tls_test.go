package helm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The blocks of docs/operations.md that make the chart's certificates and their Secrets, by their
// markers (docs/doc.go: the openssl block is runnable, the kubectl block rendered).
const (
	certificatesMarker = "<!-- runnable: chart-tls-certificates "
	secretsMarker      = "<!-- rendered: chart-tls-secrets:"
)

// docBlock returns the commands of the fenced block right after the line that starts with marker
// in the document at path, continuation lines joined, comments dropped.
func docBlock(t *testing.T, path, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "\n"+marker)
	if i < 0 {
		t.Fatalf("%s has no line starting with %q", path, marker)
	}
	_, rest, _ := strings.Cut(string(b)[i+1:], "\n") // the marker's line
	fence, rest, _ := strings.Cut(rest, "\n")
	if !strings.HasPrefix(fence, "```") {
		t.Fatalf("%s: the line after %q is %q, not a fence", path, marker, fence)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("%s: the block after %q does not end", path, marker)
	}
	var cmds []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", ""), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// recipeSecrets reads `kubectl -n NS create secret tls|generic NAME ...` lines: the files each
// key of each Secret is made from (paths in dir).
func recipeSecrets(t *testing.T, lines []string, dir string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 7 || f[1] != "-n" || f[3] != "create" || f[4] != "secret" {
			t.Fatalf("recipe line %q: want kubectl -n NS create secret tls|generic NAME ...", line)
		}
		if f[2] != namespace {
			t.Errorf("recipe line %q makes its Secret in namespace %s; the docs install the chart in %s", line, f[2], namespace)
		}
		keys := map[string]string{}
		for _, arg := range f[7:] {
			name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			switch {
			case f[5] == "tls" && name == "cert":
				keys["tls.crt"] = value
			case f[5] == "tls" && name == "key":
				keys["tls.key"] = value
			case f[5] == "generic" && name == "from-file":
				key, file, found := strings.Cut(value, "=")
				if !found {
					key, file = filepath.Base(value), value
				}
				keys[key] = file
			default:
				t.Fatalf("recipe line %q: argument %q not understood", line, arg)
			}
		}
		for k, file := range keys {
			keys[k] = filepath.Join(dir, file)
		}
		out[f[6]] = keys
	}
	return out
}

// helmInstallNamespaces returns the --namespace of every `helm install` line of the document.
func helmInstallNamespaces(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`helm install \S+ \S+ .*--namespace[ =](\S+)`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func loadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: not PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func loadPool(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	p.AddCert(loadCert(t, path))
	return p
}

// hostsOf returns the hosts of a list of host:port (or id=host:port) entries.
func hostsOf(t *testing.T, list string) []string {
	t.Helper()
	var out []string
	for _, e := range strings.Split(list, ",") {
		if _, addr, ok := strings.Cut(e, "="); ok {
			e = addr
		}
		host, _, err := net.SplitHostPort(e)
		if err != nil {
			t.Fatalf("address %q: %v", e, err)
		}
		out = append(out, host)
	}
	return out
}

// dialled are the names clients dial, by the certificate that must answer for them.
type dialled struct {
	// server: names a client dials on the RSocket or admin port (--tls-cert answers).
	server map[string]string // name → who dials it
	// raft: names coordinators dial for Raft (--raft-tls-cert answers).
	raft map[string]string
}

// dialledNames collects every host name the rendered pods and the NOTES' ctl lines dial, but
// Cassandra's (the chart makes no Cassandra certificate).
func dialledNames(t *testing.T, ms []manifest, notes string) dialled {
	t.Helper()
	d := dialled{server: map[string]string{}, raft: map[string]string{}}
	sts := find(t, ms, "StatefulSet", "retryring")
	c := container0(t, sts)
	for i := range *sts.Spec.Replicas {
		name := fmt.Sprintf("retryring-%d", i)
		args, _, err := pod{Name: name, IP: "10.1.0.1"}.command(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"rsocket-advertise", "http-advertise", "join"} {
			if v, ok := flagValue(args, flag); ok {
				for _, h := range hostsOf(t, v) {
					d.server[h] = name + " --" + flag
				}
			}
		}
		for _, flag := range []string{"peers", "raft-advertise"} {
			if v, ok := flagValue(args, flag); ok {
				for _, h := range hostsOf(t, v) {
					d.raft[h] = name + " --" + flag
				}
			}
		}
	}
	w := container0(t, find(t, ms, "Deployment", "retryring-worker"))
	v, _ := flagValue(w.Args, "coordinators")
	for _, h := range hostsOf(t, v) {
		d.server[h] = "worker --coordinators"
	}
	for _, f := range commandLines(notes, "retryring") {
		if raw, ok := ctlFlag(f, "coordinator"); ok {
			host, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(raw, "https://"), "http://"), ":")
			d.server[host] = "NOTES: " + strings.Join(f, " ")
		}
	}
	if len(d.server) == 0 || len(d.raft) == 0 {
		t.Fatalf("no dialled names found: %+v", d)
	}
	return d
}

// TestChartTLSNamesVerify: the certificates docs/operations.md tells an operator to make (its
// chart-tls-certificates block, run as written by bash, and its chart-tls-secrets block, read for
// the Secret each file goes into) answer for every name a client of the rendered chart dials. The
// doc's own commands make the certificate, so the doc cannot drift from what is checked. For
// ci/tls-values.yaml, with and without coordinator.join (scaling): the coordinators' certificate
// verifies, against the CA the workers and ctl trust, for each pod's advertised names, the
// client Service the workers dial, the --join target and the NOTES' ctl address; the Raft
// certificate, against the Raft CA, for every --peers address, and as a client; the workers'
// client certificate against the coordinators' client CA, binding the workers' pod names. The
// names the NOTES list verify too, and the namespace of the recipe is the one the docs install in.
func TestChartTLSNamesVerify(t *testing.T) {
	doc := filepath.Join(root, "docs", "operations.md")
	for _, path := range []string{doc, filepath.Join(root, "README.md")} {
		for _, ns := range helmInstallNamespaces(t, path) {
			if ns != namespace {
				t.Errorf("%s installs the chart in namespace %s; the TLS recipe of docs/operations.md and this test use %s", path, ns, namespace)
			}
		}
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl runs the doc's recipe: %v", err)
	}
	dir := t.TempDir()
	run := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(docBlock(t, doc, certificatesMarker), "\n"))
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the doc's recipe: %v\n%s", err, out)
	}
	secrets := recipeSecrets(t, docBlock(t, doc, secretsMarker), dir)

	for _, extra := range [][]string{nil, {"--set", "coordinator.join=retryring.retryring.svc.cluster.local:7480", "--set", "coordinator.replicas=5"}} {
		args := append([]string{"-f", filepath.Join(chartDir(), tlsValues)}, extra...)
		ms := render(t, args...)
		d := dialledNames(t, ms, renderNotes(t, args...))

		// file returns the recipe's file behind the rendered flag of container c.
		file := func(who string, c container, p podSpec, flag string) string {
			t.Helper()
			v, ok := flagValue(c.Args, flag)
			if !ok {
				t.Fatalf("%s: no --%s", who, flag)
			}
			secret := secretFiles(t, c, p)[filepath.Dir(v)]
			f := secrets[secret][filepath.Base(v)]
			if f == "" {
				t.Fatalf("%s --%s=%s: key %s of Secret %q, which the doc's recipe does not make (it makes %v)", who, flag, v, filepath.Base(v), secret, secrets)
			}
			return f
		}
		sts := find(t, ms, "StatefulSet", "retryring")
		c, cp := container0(t, sts), sts.Spec.Template.Spec
		dep := find(t, ms, "Deployment", "retryring-worker")
		w, wp := container0(t, dep), dep.Spec.Template.Spec

		serverCert := loadCert(t, file("coordinator", c, cp, "tls-cert"))
		for _, roots := range []struct{ who, path string }{
			{"the workers' --coordinator-ca (ctl's coord-ca.crt)", file("worker", w, wp, "coordinator-ca")},
			{"the coordinators' --raft-tls-ca (admin calls between them)", file("coordinator", c, cp, "raft-tls-ca")},
		} {
			for name, who := range d.server {
				if _, err := serverCert.Verify(x509.VerifyOptions{DNSName: name, Roots: loadPool(t, roots.path),
					KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
					t.Errorf("%v: %s dials %s: the certificate of --tls-cert, checked with %s: %v", extra, who, name, roots.who, err)
				}
			}
		}
		raftCert := loadCert(t, file("coordinator", c, cp, "raft-tls-cert"))
		raftRoots := loadPool(t, file("coordinator", c, cp, "raft-tls-ca"))
		for name, who := range d.raft {
			if _, err := raftCert.Verify(x509.VerifyOptions{DNSName: name, Roots: raftRoots,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%v: %s dials %s: the certificate of --raft-tls-cert: %v", extra, who, name, err)
			}
		}
		if _, err := raftCert.Verify(x509.VerifyOptions{Roots: raftRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the Raft certificate as a client (Raft is mutual TLS): %v", err)
		}
		workerCert := loadCert(t, file("worker", w, wp, "coordinator-cert"))
		if _, err := workerCert.Verify(x509.VerifyOptions{Roots: loadPool(t, file("coordinator", c, cp, "tls-client-ca")),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("the workers' certificate against the coordinators' --tls-client-ca: %v", err)
		}
		workerID, _, _ := pod{Name: "retryring-worker-7d9f4c6b8-x2x9z"}.command(w)
		id, _ := flagValue(workerID, "worker-id")
		if !slices.ContainsFunc(workerCert.URIs, func(u *url.URL) bool {
			prefix, ok := strings.CutPrefix(u.String(), "urn:retryring:worker-id-prefix:")
			return ok && strings.HasPrefix(id, prefix)
		}) {
			t.Errorf("the workers' certificate binds %v; worker id %s is not among them", workerCert.URIs, id)
		}
	}

	// The names the NOTES of a TLS install list, made into a certificate, cover the same names.
	notes := renderNotes(t, "-f", filepath.Join(chartDir(), tlsValues), "--set", "coordinator.join=retryring.retryring.svc.cluster.local:7480")
	listed := notesCertificate(t, notes)
	d := dialledNames(t, render(t, "-f", filepath.Join(chartDir(), tlsValues), "--set", "coordinator.join=retryring.retryring.svc.cluster.local:7480"), notes)
	for _, names := range []map[string]string{d.server, d.raft} {
		for name, who := range names {
			if err := listed.VerifyHostname(name); err != nil {
				t.Errorf("%s dials %s, which the names NOTES list do not cover: %v", who, name, err)
			}
		}
	}
}

// notesCertificate makes a self-signed certificate with the DNS: names the NOTES list.
func notesCertificate(t *testing.T, notes string) *x509.Certificate {
	t.Helper()
	var names []string
	for _, m := range regexp.MustCompile(`DNS:([^\s,]+)`).FindAllStringSubmatch(notes, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("the NOTES of a TLS install list no DNS: name:\n%s", notes)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "notes"}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
