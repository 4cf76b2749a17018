package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// harness are the top-level folders whose code tests or measures the product (testkit/layers'
// list).
var harness = map[string]bool{"testkit": true, "bench": true, "e2e": true, "conformance": true, "docs": true, "deploy": true}

// skipped are folders that hold no Go of the module's own.
var skipped = map[string]bool{".git": true, ".cassandra": true, "bin": true, "node_modules": true, "vendor": true}

func main() {
	dir := flag.String("dir", ".", "the checkout to measure")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "house:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	c, err := count(dir)
	if err != nil {
		return err
	}
	testing, err := testingLinks(dir)
	if err != nil {
		return err
	}
	node, err := methods(filepath.Join(dir, "coordinator"), "Node")
	if err != nil {
		return err
	}
	term, err := methods(filepath.Join(dir, "coordinator"), "leaderTerm")
	if err != nil {
		return err
	}
	tests, cass, err := cassandraTests(filepath.Join(dir, "worker"))
	if err != nil {
		return err
	}
	fmt.Printf("product lines (non-test Go)   %d  (of which internal/ %d)\n", c.product, c.internal)
	fmt.Printf("harness lines (non-test Go)   %d  (testkit/, bench/, e2e/, conformance/, docs/, deploy/)\n", c.harness)
	fmt.Printf("test-file lines               %d\n", c.tests)
	fmt.Printf("testing in the binary         %d  (go list -deps ./cmd/retryring | grep -c -x testing)\n", testing)
	fmt.Printf("methods on coordinator.Node   %d  (non-test files)\n", node)
	fmt.Printf("methods on leaderTerm         %d  (non-test files)\n", term)
	fmt.Printf("longest product function      %d lines: %s\n", c.longest.lines, c.longest.name)
	fmt.Printf("worker tests needing Cassandra %d of %d\n", cass, tests)
	return nil
}

type function struct {
	name  string
	lines int
}

type counts struct {
	product, harness, tests int
	internal                int // product lines under internal/
	longest                 function
}

// count walks the checkout's Go files.
func count(dir string) (counts, error) {
	var c counts
	fset := token.NewFileSet()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		if d.IsDir() {
			if skipped[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		n, err := lines(path)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, "_test.go"):
			c.tests += n
			return nil
		case harness[top]:
			c.harness += n
			return nil
		}
		c.product += n
		if top == "internal" {
			c.internal += n
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			l := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if l > c.longest.lines {
				c.longest = function{name: fmt.Sprintf("%s %s", filepath.ToSlash(rel), funcName(fn)), lines: l}
			}
		}
		return nil
	})
	return c, err
}

func lines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return fmt.Sprintf("(%s).%s", receiver(fn.Recv.List[0].Type), fn.Name.Name)
}

// receiver names a method's receiver type without its star and type parameters.
func receiver(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.IndexListExpr:
		return receiver(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// testingLinks counts package testing among the binary's dependencies.
func testingLinks(dir string) (int, error) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/retryring")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("go list -deps ./cmd/retryring in %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if l == "testing" {
			n++
		}
	}
	return n, nil
}

// methods counts the methods declared on typ in the package's non-test files.
func methods(pkgDir, typ string) (int, error) {
	files, err := parse(pkgDir, false)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) > 0 && receiver(fn.Recv.List[0].Type) == typ {
				n++
			}
		}
	}
	return n, nil
}

// parse parses the package's Go files: its test files (tests) or the others.
func parse(pkgDir string, tests bool) ([]*ast.File, error) {
	entries, err := os.ReadDir(pkgDir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") != tests {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(pkgDir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// cassandraTests counts the package's Test functions and those that reach a Cassandra test kit
// package: a call into an imported package named *storetest or *cassandratest, directly or
// through the package's own test functions and methods (by name: a method and a function of the
// same name are one node, which can only over-count).
func cassandraTests(pkgDir string) (tests, needing int, err error) {
	files, err := parse(pkgDir, true)
	if err != nil {
		return 0, 0, err
	}
	calls := map[string]map[string]bool{} // function name -> names it calls in the package
	direct := map[string]bool{}           // function name -> calls a Cassandra kit
	var testNames []string
	for _, f := range files {
		kits := map[string]bool{}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if strings.HasSuffix(path, "storetest") || strings.HasSuffix(path, "cassandratest") {
				kits[name] = true
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv == nil && strings.HasPrefix(name, "Test") && name != "TestMain" {
				testNames = append(testNames, name)
			}
			if calls[name] == nil {
				calls[name] = map[string]bool{}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && kits[id.Name] {
						direct[name] = true
					}
					calls[name][x.Sel.Name] = true
				case *ast.Ident:
					calls[name][x.Name] = true
				}
				return true
			})
		}
	}
	sort.Strings(testNames)
	for _, t := range testNames {
		if reaches(t, calls, direct, map[string]bool{}) {
			needing++
		}
	}
	return len(testNames), needing, nil
}

func reaches(fn string, calls map[string]map[string]bool, direct, seen map[string]bool) bool {
	if direct[fn] {
		return true
	}
	if seen[fn] {
		return false
	}
	seen[fn] = true
	for callee := range calls[fn] {
		if _, declared := calls[callee]; declared && reaches(callee, calls, direct, seen) {
			return true
		}
	}
	return false
}
