package image

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/retryring/retryring/internal/proc"
)

// root is the module root: the chart, bin/image and the git repository are found from it.
var root string

func TestMain(m *testing.M) {
	var err error
	if root, err = proc.ModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// The paths the Dockerfile gives the image's files.
const (
	binaryPath   = "/usr/local/bin/retryring"
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	homePath     = "/var/lib/retryring"
)

// chart is what the Helm chart deploys by default: the image's tag and full reference, and the
// uid and gid its pods run as.
type chart struct {
	tag, reference string
	uid, gid       int
}

func readChart(t *testing.T) chart {
	t.Helper()
	dir := filepath.Join(root, "deploy", "helm", "retryring")
	var meta struct {
		AppVersion string `yaml:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
		PodSecurityContext struct {
			RunAsUser  int `yaml:"runAsUser"`
			RunAsGroup int `yaml:"runAsGroup"`
		} `yaml:"podSecurityContext"`
	}
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &meta)
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	tag := values.Image.Tag
	if tag == "" {
		tag = meta.AppVersion
	}
	return chart{
		tag:       tag,
		reference: dockerReference(values.Image.Repository) + ":" + tag,
		uid:       values.PodSecurityContext.RunAsUser,
		gid:       values.PodSecurityContext.RunAsGroup,
	}
}

// dockerReference is the full name a container runtime gives a repository written as in a pod
// spec: "retryring/retryring" is docker.io/retryring/retryring.
func dockerReference(repository string) string {
	first, _, found := strings.Cut(repository, "/")
	if !found {
		return "docker.io/library/" + repository
	}
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return repository
	}
	return "docker.io/" + repository
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// archivePaths are the docker and OCI archives `make image` writes for the chart's default tag.
// Without them the test is skipped, or fails under RETRYRING_REQUIRE_IMAGE=1 (`make test`).
func archivePaths(t *testing.T, c chart) (docker, oci string) {
	t.Helper()
	base := filepath.Join(root, "bin", "image", "retryring-"+c.tag)
	docker, oci = base+".docker.tar", base+".oci.tar"
	for _, p := range []string{docker, oci} {
		if _, err := os.Stat(p); err != nil {
			requireOrSkip(t, fmt.Sprintf("image archive %s not found: run `make image`", p))
		}
	}
	return docker, oci
}

// requireOrSkip fails the test under RETRYRING_REQUIRE_IMAGE=1, else skips it.
func requireOrSkip(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("RETRYRING_REQUIRE_IMAGE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// tarFiles reads every regular file of a tar stream, by name without a leading "./".
func tarFiles(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, err := tarFiles(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return files
}

// dockerArchive is an archive in the format of `docker save`, as `docker load` reads it.
type dockerArchive struct {
	path     string
	files    map[string][]byte
	manifest struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
}

func openDockerArchive(t *testing.T, path string) dockerArchive {
	t.Helper()
	a := dockerArchive{path: path, files: readTar(t, path)}
	var manifests []json.RawMessage
	if err := json.Unmarshal(a.files["manifest.json"], &manifests); err != nil {
		t.Fatalf("%s: manifest.json: %v", path, err)
	}
	if len(manifests) != 1 {
		t.Fatalf("%s: %d images in manifest.json, want 1", path, len(manifests))
	}
	if err := json.Unmarshal(manifests[0], &a.manifest); err != nil {
		t.Fatalf("%s: manifest.json: %v", path, err)
	}
	return a
}

// imageConfig is the part of an OCI image configuration that decides how the image runs.
type imageConfig struct {
	Config struct {
		User       string
		Entrypoint []string
		Cmd        []string
		WorkingDir string
		Labels     map[string]string
	} `json:"config"`
}

func (a dockerArchive) config(t *testing.T) imageConfig {
	t.Helper()
	var c imageConfig
	if err := json.Unmarshal(a.files[a.manifest.Config], &c); err != nil {
		t.Fatalf("%s: config %s: %v", a.path, a.manifest.Config, err)
	}
	return c
}

// layerEntry is one file or directory of the image's root file system.
type layerEntry struct {
	header *tar.Header
	body   []byte
}

// rootfs is every entry of every layer, by absolute path, the last layer winning.
func (a dockerArchive) rootfs(t *testing.T) map[string]layerEntry {
	t.Helper()
	entries := map[string]layerEntry{}
	for _, layer := range a.manifest.Layers {
		tr := tar.NewReader(bytes.NewReader(a.files[layer]))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", a.path, layer, err)
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: layer %s: %v", a.path, layer, err)
			}
			name := "/" + strings.Trim(strings.TrimPrefix(h.Name, "./"), "/")
			entries[name] = layerEntry{header: h, body: body}
		}
	}
	return entries
}

// ociConfigDigest is the digest of the configuration of the one image of an OCI archive, and the
// reference it is named by (what `podman load` tags it with).
func ociConfigDigest(t *testing.T, path string) (digest, reference string) {
	t.Helper()
	files := readTar(t, path)
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("%s: index.json: %v", path, err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("%s: %d images in index.json, want 1", path, len(index.Manifests))
	}
	var manifest struct {
		Config struct{ Digest string }
	}
	blob := "blobs/" + strings.Replace(index.Manifests[0].Digest, ":", "/", 1)
	if err := json.Unmarshal(files[blob], &manifest); err != nil {
		t.Fatalf("%s: manifest %s: %v", path, blob, err)
	}
	return manifest.Config.Digest, index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
}

// TestArchivesNameTheChartsImage: `docker load` and `podman load` of the archives `make image`
// wrote give the image the name and tag the chart deploys by default, and both archives hold the
// same image.
func TestArchivesNameTheChartsImage(t *testing.T) {
	c := readChart(t)
	dockerPath, ociPath := archivePaths(t, c)
	docker := openDockerArchive(t, dockerPath)
	if !slices.Equal(docker.manifest.RepoTags, []string{c.reference}) {
		t.Errorf("%s is tagged %q; the chart deploys %q (image.repository and appVersion)", dockerPath, docker.manifest.RepoTags, c.reference)
	}
	digest, reference := ociConfigDigest(t, ociPath)
	if reference != c.reference {
		t.Errorf("%s is named %q; the chart deploys %q", ociPath, reference, c.reference)
	}
	if want := "sha256:" + strings.TrimSuffix(docker.manifest.Config, ".json"); digest != want {
		t.Errorf("the archives hold different images: %s has config %s, %s has %s", ociPath, digest, dockerPath, want)
	}
}

// TestImageHoldsOnlyBinaryCertificatesAndUser reads the image's root file system: the static
// binary, the CA bundle Go reads its system roots from, the passwd and group entries of the
// chart's uid, and the data directory that uid owns; nothing else (no shell, no package manager),
// and nothing else writable by that user.
func TestImageHoldsOnlyBinaryCertificatesAndUser(t *testing.T) {
	c := readChart(t)
	dockerPath, _ := archivePaths(t, c)
	fs := openDockerArchive(t, dockerPath).rootfs(t)

	var files []string
	for name, e := range fs {
		h := e.header
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			files = append(files, name)
		default:
			t.Errorf("%s: type %q, want only files and directories", name, h.Typeflag)
		}
		uid, gid := 0, 0
		if name == homePath {
			uid, gid = c.uid, c.gid
		}
		if h.Uid != uid || h.Gid != gid {
			t.Errorf("%s is owned by %d:%d, want %d:%d", name, h.Uid, h.Gid, uid, gid)
		}
		if h.Mode&0o022 != 0 {
			t.Errorf("%s has mode %o: writable by group or others", name, h.Mode)
		}
	}
	slices.Sort(files)
	want := []string{"/etc/group", "/etc/passwd", caBundlePath, binaryPath}
	if !slices.Equal(files, want) {
		t.Errorf("the image's files are %q, want only %q", files, want)
	}
	if _, ok := fs[homePath]; !ok {
		t.Errorf("no directory %s in the image", homePath)
	}

	bin, err := elf.NewFile(bytes.NewReader(fs[binaryPath].body))
	if err != nil {
		t.Fatalf("%s: %v", binaryPath, err)
	}
	if libs, _ := bin.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs %q: a FROM scratch image has no shared libraries (build with CGO_ENABLED=0)", binaryPath, libs)
	}
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader: build it with CGO_ENABLED=0", binaryPath)
		}
	}
	if fs[binaryPath].header.Mode&0o111 != 0o111 {
		t.Errorf("%s has mode %o, want executable by everyone", binaryPath, fs[binaryPath].header.Mode)
	}

	if n := countCertificates(t, fs[caBundlePath].body); n == 0 {
		t.Errorf("%s holds no certificate", caBundlePath)
	}

	passwd := string(fs["/etc/passwd"].body)
	wantUser := fmt.Sprintf("retryring:x:%d:%d:", c.uid, c.gid)
	if !strings.HasPrefix(passwd, wantUser) || !strings.Contains(passwd, ":"+homePath+":") {
		t.Errorf("/etc/passwd is %q, want the user %q with home %s", passwd, wantUser, homePath)
	}
	if group := string(fs["/etc/group"].body); !strings.HasPrefix(group, fmt.Sprintf("retryring:x:%d:", c.gid)) {
		t.Errorf("/etc/group is %q, want the group retryring with gid %d", group, c.gid)
	}
}

// countCertificates parses a PEM bundle as Go's crypto/x509 does for the system roots.
func countCertificates(t *testing.T, bundle []byte) int {
	t.Helper()
	n := 0
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Errorf("%s: certificate %d: %v", caBundlePath, n+1, err)
		}
		n++
	}
	return n
}

// TestImageConfigRunsTheBinaryAsTheChartsUser: the chart gives the pods only arguments, and sets
// runAsNonRoot, which Kubernetes can check only against a numeric user; the labels say which
// commit the image was built from.
func TestImageConfigRunsTheBinaryAsTheChartsUser(t *testing.T) {
	c := readChart(t)
	dockerPath, _ := archivePaths(t, c)
	cfg := openDockerArchive(t, dockerPath).config(t).Config

	uid, gid, err := numericUser(cfg.User)
	if err != nil {
		t.Errorf("USER %q: %v", cfg.User, err)
	} else if uid != c.uid || gid != c.gid {
		t.Errorf("USER %q, want %d:%d: the chart's podSecurityContext runs that uid and gives it the data volume", cfg.User, c.uid, c.gid)
	}
	if uid == 0 {
		t.Errorf("USER %q is root", cfg.User)
	}
	if !slices.Equal(cfg.Entrypoint, []string{binaryPath}) || len(cfg.Cmd) != 0 {
		t.Errorf("ENTRYPOINT %q CMD %q, want ENTRYPOINT [%q] alone: the chart's pods give only arguments", cfg.Entrypoint, cfg.Cmd, binaryPath)
	}
	if cfg.WorkingDir != homePath {
		t.Errorf("WORKDIR %q, want %s (the user's: the default data dir goes there)", cfg.WorkingDir, homePath)
	}
	labels := cfg.Labels
	if got, want := labels["org.opencontainers.image.revision"], gitHead(t); got != want {
		t.Errorf("label org.opencontainers.image.revision is %q, want the repository's commit %s (run `make image` again)", got, want)
	}
	for _, key := range []string{"org.opencontainers.image.version", "org.opencontainers.image.source"} {
		if v := labels[key]; v == "" || v == "unknown" {
			t.Errorf("label %s is %q", key, v)
		}
	}
}

// numericUser parses an image's USER "uid:gid"; a name would need /etc/passwd to be checked.
func numericUser(user string) (uid, gid int, err error) {
	u, g, found := strings.Cut(user, ":")
	if !found {
		return 0, 0, errors.New("want uid:gid, both numeric")
	}
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, fmt.Errorf("uid is not numeric: %w", err)
	}
	if gid, err = strconv.Atoi(g); err != nil {
		return 0, 0, fmt.Errorf("gid is not numeric: %w", err)
	}
	return uid, gid, nil
}

// gitHead is the commit checked out: what `make image` builds into the binary and its labels.
func gitHead(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	return strings.TrimSpace(string(out))
}
