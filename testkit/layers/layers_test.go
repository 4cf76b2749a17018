package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/retryring/retryring"

// harnessRoots are the folders whose packages exist to test and measure the product.
var harnessRoots = []string{"testkit", "bench", "e2e", "conformance", "docs", "deploy"}

// linksTestingOnPurpose are the dependencies allowed to bring package testing into the binary.
var linksTestingOnPurpose = map[string]bool{"github.com/hashicorp/raft": true}

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func list(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// harness reports whether a package of this module is test kit, benchmark or test-only code.
func harness(path string) bool {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return false
	}
	for _, root := range harnessRoots {
		if rel == root || strings.HasPrefix(rel, root+"/") {
			return true
		}
	}
	return false
}

func TestLayers(t *testing.T) {
	var product int
	for _, p := range list(t, "./...") {
		if harness(p.ImportPath) {
			continue
		}
		product++
		for _, imp := range p.Imports {
			if harness(imp) {
				t.Errorf("product package %s imports %s: product code imports nothing from the test kit or the benchmarks", p.ImportPath, imp)
			}
		}
	}
	if product < 10 {
		t.Fatalf("found %d product packages; the module layout this test knows has changed", product)
	}

	deps := list(t, "-deps", "./cmd/retryring")
	var sawBinary bool
	for _, p := range deps {
		if p.ImportPath == module+"/cmd/retryring" {
			sawBinary = true
		}
		if harness(p.ImportPath) {
			t.Errorf("the retryring binary links %s", p.ImportPath)
		}
		if p.Standard || linksTestingOnPurpose[p.ImportPath] {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "testing" {
				t.Errorf("the retryring binary links package testing through %s", p.ImportPath)
			}
		}
	}
	if !sawBinary {
		t.Fatal("go list -deps ./cmd/retryring did not list the binary itself")
	}
}

// layerRow is a row of docs/architecture.md's layer table: "| 3 | `coordinator`, `worker` | why |".
var (
	layerRow   = regexp.MustCompile("(?m)^\\| (\\d+) \\| ([^|]+)\\|")
	backquoted = regexp.MustCompile("`([^`]+)`")
)

// layerTable reads the layer of each product folder from docs/architecture.md, "Layout".
func layerTable(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Layout")
	if start < 0 {
		t.Fatal("docs/architecture.md has no Layout section")
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	layers := map[string]int{}
	for _, m := range layerRow.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		for _, f := range backquoted.FindAllStringSubmatch(m[2], -1) {
			if prev, dup := layers[f[1]]; dup {
				t.Errorf("docs/architecture.md puts %s in layers %d and %d", f[1], prev, n)
			}
			layers[f[1]] = n
		}
	}
	if len(layers) < 10 {
		t.Fatalf("docs/architecture.md's layer table names %d folders", len(layers))
	}
	return layers
}

// layerOf is the layer of the longest folder of the table that holds path.
func layerOf(layers map[string]int, path string) (string, int, bool) {
	rel := strings.TrimPrefix(path, module+"/")
	for dir := rel; dir != "."; {
		if n, ok := layers[dir]; ok {
			return dir, n, true
		}
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			break
		}
		dir = dir[:i]
	}
	return "", 0, false
}

// TestImportsGoDown: every product package imports only from folders of a lower layer than its
// own (or from its own folder), as docs/architecture.md's table orders them, and every product
// package is in a folder the table names.
func TestImportsGoDown(t *testing.T) {
	layers := layerTable(t)
	var edges int
	for _, p := range list(t, "./...") {
		if harness(p.ImportPath) {
			continue
		}
		from, lf, ok := layerOf(layers, p.ImportPath)
		if !ok {
			t.Errorf("product package %s is in no folder of docs/architecture.md's layer table: add a row", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") || harness(imp) {
				continue
			}
			to, lt, ok := layerOf(layers, imp)
			if !ok || to == from {
				continue // reported as its own package, or within one folder
			}
			edges++
			if lt >= lf {
				t.Errorf("%s (layer %d, %s) imports %s (layer %d, %s): imports go to lower layers only", p.ImportPath, lf, from, imp, lt, to)
			}
		}
	}
	if edges < 20 {
		t.Fatalf("checked %d imports between folders: the walk missed the module", edges)
	}
}
