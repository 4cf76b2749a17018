package docs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// chartRenderer finds helm and kubernetes-validate and knows the Secret keys the chart's pods read.
type chartRenderer struct {
	root string
	once sync.Once
	keys map[string]bool
	err  error
}

// The chart, and the values file that stands for a values file not in the repository.
const (
	chartPath       = "deploy/helm/retryring"
	standInValues   = "deploy/helm/retryring/ci/tls-values.yaml"
	renderTimeout   = 2 * time.Minute
	requireHelmEnvs = "RETRYRING_REQUIRE_HELM"
)

// tools returns bin/helm and bin/venv's kubernetes-validate, or why they cannot be used.
func (c *chartRenderer) tools() (helm, validate string, err error) {
	helm = filepath.Join(c.root, "bin", "helm")
	validate = filepath.Join(c.root, "bin", "venv", "bin", "kubernetes-validate")
	for _, p := range []string{helm, validate} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s is missing: run `make chart-check`, which installs it", p)
		}
	}
	return helm, validate, nil
}

// mountedKeys is the set of file names the chart's pods read from their Secrets, rendered with the
// TLS values (which name every Secret): `--FLAG=/etc/retryring/DIR/KEY` in the pods' args.
func (c *chartRenderer) mountedKeys(ctx context.Context) (map[string]bool, error) {
	c.once.Do(func() {
		helm, _, err := c.tools()
		if err != nil {
			c.err = err
			return
		}
		out, err := runCommand(ctx, c.root, helm, "template", "retryring", chartPath, "--namespace", "retryring", "-f", standInValues)
		if err != nil {
			c.err = err
			return
		}
		c.keys = map[string]bool{}
		for _, m := range mountedFile.FindAllStringSubmatch(string(out), -1) {
			c.keys[m[1]] = true
		}
	})
	return c.keys, c.err
}

var mountedFile = regexp.MustCompile(`--[a-z-]+=/etc/retryring/[A-Za-z0-9._-]+/([A-Za-z0-9._-]+)`)

// shellLines is a block's commands: continuation lines joined, comments and blank lines dropped.
func shellLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(line); cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			continue
		}
		cur.WriteString(line)
		if c, _, _ := strings.Cut(cur.String(), " #"); strings.TrimSpace(c) != "" {
			out = append(out, strings.TrimSpace(c))
		}
		cur.Reset()
	}
	return out
}

// helmTemplateArgs turns a documented `helm install` (or `upgrade --install`) into `helm template`
// arguments: the flags that only matter to a cluster are dropped, and a values file that is not in
// the repository becomes the chart's TLS values.
func helmTemplateArgs(words []string, inRepo func(string) bool) ([]string, error) {
	if len(words) < 2 || words[0] != "helm" {
		return nil, fmt.Errorf("not a helm command: %q", strings.Join(words, " "))
	}
	var args []string
	sub := ""
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--create-namespace", w == "--wait", w == "--atomic", w == "--wait-for-jobs", w == "--install", w == "-i":
			continue
		case w == "--timeout":
			i++
			continue
		case strings.HasPrefix(w, "--timeout="):
			continue
		case w == "-f" || w == "--values":
			if i+1 >= len(words) {
				return nil, fmt.Errorf("%s without a file", w)
			}
			i++
			file := words[i]
			if !inRepo(file) {
				file = standInValues
			}
			args = append(args, "-f", file)
			continue
		case sub == "" && !strings.HasPrefix(w, "-"):
			sub = w
			if w != "install" && w != "upgrade" && w != "template" {
				return nil, fmt.Errorf("helm %s: a rendered block may hold helm install, upgrade --install or template", w)
			}
			w = "template"
		}
		args = append(args, w)
	}
	if sub == "" {
		return nil, fmt.Errorf("helm without a subcommand")
	}
	return args, nil
}

// A secretLine is a documented `kubectl create secret` line, read without running kubectl.
type secretLine struct {
	keys  []string // the Secret's data keys
	files []string // the files it reads
	tls   bool     // a `secret tls`: files are --cert and --key
}

// parseSecretLine checks a kubectl line's words against the command and flags it may use:
// `kubectl [-n NS] create secret tls NAME --cert=F --key=F` or
// `kubectl [-n NS] create secret generic NAME (--from-file=[KEY=]F | --from-literal=KEY=V)...`.
func parseSecretLine(words []string) (secretLine, error) {
	var s secretLine
	var pos []string
	for i := 1; i < len(words); i++ {
		w := words[i]
		flag, value, hasValue := strings.Cut(w, "=")
		switch flag {
		case "-n", "--namespace":
			if !hasValue {
				i++
			}
		case "--cert", "--key":
			if !hasValue || value == "" {
				return s, fmt.Errorf("%s needs =FILE", flag)
			}
			s.files = append(s.files, value)
		case "--from-file":
			key, file, named := strings.Cut(value, "=")
			if !named {
				key, file = filepath.Base(value), value
			}
			s.keys, s.files = append(s.keys, key), append(s.files, file)
		case "--from-literal":
			key, _, ok := strings.Cut(value, "=")
			if !ok {
				return s, fmt.Errorf("--from-literal=%s: write KEY=VALUE", value)
			}
			s.keys = append(s.keys, key)
		default:
			if strings.HasPrefix(w, "-") {
				return s, fmt.Errorf("kubectl flag %s: a documented secret line uses -n, --cert, --key, --from-file and --from-literal", w)
			}
			pos = append(pos, w)
		}
	}
	if len(pos) != 4 || pos[0] != "create" || pos[1] != "secret" {
		return s, fmt.Errorf("kubectl %s: a rendered block may hold `kubectl create secret tls|generic NAME ...`", strings.Join(pos, " "))
	}
	switch pos[2] {
	case "tls":
		if len(s.files) != 2 || len(s.keys) != 0 {
			return s, fmt.Errorf("kubectl create secret tls %s: give --cert=FILE and --key=FILE, nothing else", pos[3])
		}
		s.tls, s.keys = true, []string{"tls.crt", "tls.key"}
	case "generic":
		if len(s.keys) == 0 {
			return s, fmt.Errorf("kubectl create secret generic %s: no --from-file or --from-literal", pos[3])
		}
	default:
		return s, fmt.Errorf("kubectl create secret %s: tls or generic", pos[2])
	}
	return s, nil
}

// render checks a rendered block (package doc): every line is a helm or kubectl command, rendered
// and validated, never applied.
func (r *fileRun) render(b block) {
	t := r.t
	t.Helper()
	helm, validate, toolErr := r.charts.tools()
	if toolErr != nil {
		if os.Getenv(requireHelmEnvs) == "1" {
			t.Fatalf("%s: %v", b, toolErr)
		}
		t.Logf("%s: not rendered: %v (%s=1 makes this a failure)", b, toolErr, requireHelmEnvs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), renderTimeout)
	defer cancel()
	scratch := t.TempDir()
	for i, line := range shellLines(b.text) {
		words := strings.Fields(line)
		out := filepath.Join(scratch, fmt.Sprintf("%s-%d.yaml", b.name, i+1))
		switch words[0] {
		case "helm":
			args, err := helmTemplateArgs(words, func(p string) bool {
				_, err := os.Stat(filepath.Join(r.root, p))
				return err == nil
			})
			if err != nil {
				t.Fatalf("%s: %q: %v", b, line, err)
			}
			if toolErr != nil {
				continue
			}
			manifest, err := runCommand(ctx, r.root, helm, args...)
			if err != nil {
				t.Fatalf("%s: %q rendered as `helm %s`: %v", b, line, strings.Join(args, " "), err)
			}
			r.validate(ctx, b, line, validate, out, manifest)
			t.Logf("%s: %q rendered as `helm %s`: valid", b, line, strings.Join(args, " "))
		case "kubectl":
			s, err := parseSecretLine(words)
			if err != nil {
				t.Fatalf("%s: %q: %v", b, line, err)
			}
			if toolErr != nil {
				continue
			}
			keys, err := r.charts.mountedKeys(ctx)
			if err != nil {
				t.Fatalf("%s: the chart's Secret keys: %v", b, err)
			}
			for _, k := range s.keys {
				if !keys[k] {
					t.Errorf("%s: %q makes a Secret key %q, which no pod of the chart reads (it reads %s)", b, line, k, strings.Join(sortedKeys(keys), ", "))
				}
			}
			if _, err := exec.LookPath("kubectl"); err != nil {
				t.Logf("%s: kubectl not found: %q checked for its command and flags only", b, line)
				continue
			}
			if err := r.standIns(scratch, s); err != nil {
				t.Fatalf("%s: stand-in files: %v", b, err)
			}
			manifest, err := runCommand(ctx, scratch, "kubectl", append(words[1:], "--dry-run=client", "-o", "yaml")...)
			if err != nil {
				t.Fatalf("%s: %q with --dry-run=client: %v", b, line, err)
			}
			r.validate(ctx, b, line, validate, out, manifest)
			t.Logf("%s: %q rendered with --dry-run=client: valid, keys %s read by the chart", b, line, strings.Join(s.keys, ", "))
		default:
			t.Fatalf("%s: %q: a rendered block holds only helm and kubectl lines", b, line)
		}
	}
}

// validate checks rendered manifests against the Kubernetes schemas, unknown fields included.
func (r *fileRun) validate(ctx context.Context, b block, line, validate, file string, manifest []byte) {
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if out, err := runCommand(ctx, r.root, validate, "--strict", "--quiet", file); err != nil {
		r.t.Fatalf("%s: what %q renders is not valid Kubernetes: %v\n%s", b, line, err, out)
	}
}

// standIns puts the files a secret line reads into scratch: the run's own files when blocks made
// them, else stand-ins: one self-signed key pair for --cert and --key, a line of text for the others.
func (r *fileRun) standIns(scratch string, s secretLine) error {
	var pair [][]byte
	for i, f := range s.files {
		content, err := os.ReadFile(filepath.Join(r.work, f))
		switch {
		case err == nil:
		case s.tls:
			if pair == nil {
				cert, key, err := selfSigned()
				if err != nil {
					return err
				}
				pair = [][]byte{cert, key}
			}
			content = pair[i]
		default:
			content = []byte("stand-in-for-" + filepath.Base(f) + "\n")
		}
		dst := filepath.Join(scratch, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, content, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// selfSigned makes a PEM certificate and key for a stand-in TLS Secret.
func selfSigned() (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "stand-in"},
		DNSNames:     []string{"stand-in"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
