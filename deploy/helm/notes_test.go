package helm

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// notesTemplate renders the chart's NOTES.txt as a document of its own: `helm template` leaves
// NOTES out, and `helm install --dry-run` needs a cluster.
const notesTemplate = `kind: RenderedNotes
notes: |
{{ include "retryring/templates/NOTES.txt" . | indent 2 }}
`

// renderNotes renders NOTES.txt with the values of extra, from a copy of the chart that has one
// template more.
func renderNotes(t *testing.T, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "retryring")
	if err := os.CopyFS(dir, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-rendered-notes.yaml"), []byte(notesTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", releaseName, dir, "--namespace", namespace, "--show-only", "templates/zz-rendered-notes.yaml"}, extra...)
	out, err := exec.Command(helmPath(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("rendered NOTES: %v\n%s", err, out)
	}
	return doc.Notes
}

// commandLines returns the lines of notes that run prog, without their indentation.
func commandLines(notes, prog string) [][]string {
	var out [][]string
	for _, line := range strings.Split(notes, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == prog {
			out = append(out, f)
		}
	}
	return out
}

// ctlFlag returns the value of --name in a command line split into fields (--name value form).
func ctlFlag(fields []string, name string) (string, bool) {
	i := slices.Index(fields, "--"+name)
	if i < 0 || i+1 >= len(fields) {
		return "", false
	}
	return fields[i+1], true
}

// TestChartNotesCommands renders the NOTES of an authenticated install, of a TLS install and of
// the insecure opt-out, and checks every command they print: each `retryring` line parses with
// the binary's own flags (run with --help added: an unknown flag or command fails), its ctl
// lines carry --ca with TLS and --token-file with authentication, the coordinator URL's scheme
// follows TLS and its port is the one the printed `kubectl port-forward` forwards, to a Service
// and port the chart renders; the file the CA is saved to comes from a Secret the workers mount
// for it. The opt-out prints a warning.
func TestChartNotesCommands(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		tls, auth bool
	}{
		{"auth", withAuth(), false, true},
		{"tls", []string{"-f", filepath.Join(chartDir(), tlsValues)}, true, true},
		{"insecure", []string{"--set", "auth.insecureNoAuthentication=true"}, false, false},
	} {
		notes := renderNotes(t, tc.args...)
		ms := render(t, tc.args...)
		if warned := strings.Contains(notes, "WARNING: authentication is OFF"); warned == tc.auth {
			t.Errorf("%s: NOTES warn about authentication being off: %v\n%s", tc.name, warned, notes)
		}

		forwarded := map[string]bool{} // local ports a printed port-forward listens on
		savedCA := ""                  // the file a printed kubectl line saves the coordinators' CA to
		for _, f := range commandLines(notes, "kubectl") {
			switch {
			case slices.Contains(f, "port-forward"):
				i := slices.Index(f, "port-forward")
				if i+2 >= len(f) || f[1] != "-n" || f[2] != namespace {
					t.Errorf("%s: %q: want kubectl -n %s port-forward svc/NAME LOCAL:REMOTE", tc.name, strings.Join(f, " "), namespace)
					continue
				}
				svcName, _ := strings.CutPrefix(f[i+1], "svc/")
				local, remote, _ := strings.Cut(f[i+2], ":")
				svc := find(t, ms, "Service", svcName)
				if !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return strconv.Itoa(p.Port) == remote }) {
					t.Errorf("%s: %q forwards port %s of Service %s, which has %+v", tc.name, strings.Join(f, " "), remote, svcName, svc.Spec.Ports)
				}
				forwarded[local] = true
			case slices.Contains(f, "secret") && slices.Contains(f, "get"):
				// The CA file: from the Secret the workers verify the coordinators with.
				dep := find(t, ms, "Deployment", "retryring-worker")
				w := container0(t, dep)
				v, _ := flagValue(w.Args, "coordinator-ca")
				want := secretFiles(t, w, dep.Spec.Template.Spec)[filepath.Dir(v)]
				if f[slices.Index(f, "secret")+1] != want || !strings.Contains(strings.Join(f, " "), `{.data.ca\.crt}`) {
					t.Errorf("%s: %q: want key ca.crt of the workers' --coordinator-ca Secret %q", tc.name, strings.Join(f, " "), want)
					continue
				}
				savedCA = f[len(f)-1]
			}
		}

		lines := commandLines(notes, "retryring")
		if len(lines) == 0 {
			t.Errorf("%s: NOTES print no retryring command:\n%s", tc.name, notes)
		}
		for _, f := range lines {
			line := strings.Join(f, " ")
			if out, err := exec.Command(binary, append(f[1:], "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s: %q does not parse: %v\n%s", tc.name, line, err, out)
			}
			if f[1] != "ctl" {
				continue
			}
			ca, hasCA := ctlFlag(f, "ca")
			token, hasToken := ctlFlag(f, "token-file")
			if hasCA != tc.tls || hasToken != tc.auth {
				t.Errorf("%s: %q: --ca %v, --token-file %v; want %v and %v", tc.name, line, hasCA, hasToken, tc.tls, tc.auth)
			}
			if hasCA && ca != savedCA {
				t.Errorf("%s: %q: --ca %s, which no printed kubectl line saves (it saves %q)", tc.name, line, ca, savedCA)
			}
			if hasToken && !strings.Contains(notes, token+": the admin token `retryring token new --name ops` printed") {
				t.Errorf("%s: %q: NOTES do not say where %s comes from", tc.name, line, token)
			}
			raw, _ := ctlFlag(f, "coordinator")
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != map[bool]string{true: "https", false: "http"}[tc.tls] || !forwarded[u.Port()] {
				t.Errorf("%s: %q: --coordinator %s is not %s to a port NOTES port-forward (%v)", tc.name, line, raw,
					map[bool]string{true: "https", false: "http"}[tc.tls], forwarded)
			}
		}
	}
}
