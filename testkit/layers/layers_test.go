package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
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
