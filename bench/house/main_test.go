package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCassandraTestsFollowsHelpers: a test counts as needing Cassandra when it reaches a
// storetest or cassandratest call through the package's own helpers, and not otherwise.
func TestCassandraTestsFollowsHelpers(t *testing.T) {
	dir := t.TempDir()
	src := `package w

import (
	"testing"

	st "example.com/m/testkit/storetest"
)

func newStore(t *testing.T) any { return st.New(t) }

func viaHelper(t *testing.T) any { return newStore(t) }

func pure(x int) int { return x + 1 }

func TestDirect(t *testing.T)    { _ = st.New(t) }
func TestTwoHops(t *testing.T)   { _ = viaHelper(t) }
func TestPure(t *testing.T)      { _ = pure(1) }
func TestRecursive(t *testing.T) { TestRecursive(t) }
`
	if err := os.WriteFile(filepath.Join(dir, "w_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, needing, err := cassandraTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tests != 4 || needing != 2 {
		t.Fatalf("tests %d, needing Cassandra %d; want 4 and 2 (TestDirect, TestTwoHops)", tests, needing)
	}
}

// TestMethodsCountsOneType counts the methods of one receiver type, pointer or not, in non-test
// files only.
func TestMethodsCountsOneType(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"n.go":      "package c\n\ntype Node struct{}\ntype other struct{}\n\nfunc (n *Node) A() {}\nfunc (n Node) b() {}\nfunc (o *other) A() {}\nfunc free() {}\n",
		"n_test.go": "package c\n\nfunc (n *Node) helper() {}\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := methods(dir, "Node")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("methods on Node: %d; want 2", n)
	}
}
