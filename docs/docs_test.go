package docs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retryring/retryring/internal/proc"
	"github.com/retryring/retryring/testkit/cassandratest"
)

func TestMain(m *testing.M) {
	if socket := os.Getenv(forwardSocketEnv); socket != "" {
		if err := forward(os.Getenv(forwardListenEnv), socket); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A docFile is a document whose marked blocks run, and the sections whose command blocks must all
// carry a marker.
type docFile struct {
	path     string   // from the module root
	sections []string // second-level headings, by prefix
}

var docFiles = []docFile{
	{path: "README.md", sections: []string{"In production"}},
	{path: "docs/operations.md", sections: []string{"TLS", "Tokens and authentication"}},
}

// TestDocsRunAsWritten runs the marked blocks of README.md and docs/operations.md (see doc.go):
// what a newcomer pastes from them works with the binary of this tree.
func TestDocsRunAsWritten(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(root, "bin", "retryring")
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("the docs run bin/retryring, which is missing: run `make build` (make test builds it first): %v", err)
	}
	keyspace := cassandratest.NewKeyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := runCommand(ctx, root, binary, "schema", "apply", "--cassandra", cassandratest.Addr(), "--keyspace", keyspace, "--replication", "1"); err != nil {
		t.Fatalf("the docs' keyspace: %v", err)
	}
	var charts chartRenderer
	charts.root = root
	for _, f := range docFiles {
		t.Run(f.path, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(root, f.path))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := parseBlocks(f.path, string(text))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range unmarkedCommands(blocks, f.sections) {
				t.Errorf("%s:%d: a command block under %q has no marker: mark it <!-- runnable: NAME --> (or rendered: NAME: REASON), see docs/doc.go", b.file, b.line, b.h2)
			}
			var marked []block
			for _, b := range blocks {
				if b.mode != unmarked {
					marked = append(marked, b)
				}
			}
			if len(marked) == 0 {
				t.Fatalf("%s has no marked block: its commands are no longer checked", f.path)
			}
			r := &fileRun{t: t, root: root, work: t.TempDir(), logs: t.TempDir(), keyspace: keyspace, charts: &charts}
			if err := linkBinary(root, r.work); err != nil {
				t.Fatal(err)
			}
			r.env = blockEnv(r.work, keyspace)
			r.ns = startNamespace(t, t.TempDir(), hostsFor(marked), cassandratest.Addr())
			t.Cleanup(r.stopBackground)
			for _, b := range marked {
				r.checkBackground()
				switch b.mode {
				case runnable:
					r.runForeground(b)
				case background:
					r.startBackground(b)
				case rendered:
					r.render(b)
				}
			}
			r.checkBackground()
		})
	}
}
