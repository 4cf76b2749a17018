package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The code cites the product contract as docs/product.md (the repository's copy): its sections by
// name and its invariants by number. These patterns find the citations.
var (
	sectionCitation   = regexp.MustCompile(`product\.md[,:]? \(?"([^"]+)"`)
	invariantCitation = regexp.MustCompile(`[Ii]nvariants? (\d+(?:(?:, | and | or |-|–)\d+)*)`)
	numberInCitation  = regexp.MustCompile(`\d+`)
	numberedItem      = regexp.MustCompile(`(?m)^(\d+)\. `)
	// outside names documents that are not in the repository (the team's shared folder).
	outside = regexp.MustCompile(`\.\./shared/|/work/shared/`)
)

// skipDirs hold no source of ours: tool output, fetched jars and data, dependencies.
var skipDirs = []string{".git", ".cassandra", "bin", "node_modules", "testdata"}

// TestCitationsStayInTheRepository: every comment and document cites only files of the
// repository, every section it names by quoting docs/product.md is in docs/product.md, and every
// invariant it names by number is one of the contract's numbered invariants.
func TestCitationsStayInTheRepository(t *testing.T) {
	product, err := os.ReadFile("product.md")
	if err != nil {
		t.Fatal(err)
	}
	invariants := contractInvariants(t, string(product))

	var files, sections, numbers int
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && (slices.Contains(skipDirs, d.Name()) || strings.HasPrefix(d.Name(), ".cassandra")) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		text := string(b)
		if filepath.Base(path) == "citations_test.go" {
			return nil // its own patterns
		}
		for _, line := range strings.Split(text, "\n") {
			if outside.MatchString(line) {
				t.Errorf("%s cites a file outside the repository: %s", path, strings.TrimSpace(line))
			}
		}
		for _, m := range sectionCitation.FindAllStringSubmatch(text, -1) {
			sections++
			if !strings.Contains(flat(string(product)), flat(m[1])) {
				t.Errorf("%s cites product.md, %q: docs/product.md has no such section or item", path, m[1])
			}
		}
		for _, m := range invariantCitation.FindAllStringSubmatch(text, -1) {
			for _, n := range numberInCitation.FindAllString(m[1], -1) {
				numbers++
				if k, _ := strconv.Atoi(n); !invariants[k] {
					t.Errorf("%s cites %q: docs/product.md has no invariant %d", path, m[0], k)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have seen the code that cites the contract; if it saw nothing, it checked nothing.
	if files < 100 || sections < 5 || numbers < 40 {
		t.Fatalf("read %d files, %d section and %d invariant citations: the walk missed the code", files, sections, numbers)
	}
}

// flat joins a quotation that a comment or a paragraph wrapped: line breaks, the comment markers
// after them and runs of spaces become one space, and a quotation may start a sentence in lower case.
func flat(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(s, "//", " ")), " "))
}

// contractInvariants are the numbers of docs/product.md's "Invariants" list.
func contractInvariants(t *testing.T, product string) map[int]bool {
	t.Helper()
	start := strings.Index(product, "\n## Invariants")
	if start < 0 {
		t.Fatal("docs/product.md has no Invariants section")
	}
	section := product[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	set := map[int]bool{}
	for _, m := range numberedItem.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		set[n] = true
	}
	if len(set) < 10 {
		t.Fatalf("docs/product.md lists %d invariants", len(set))
	}
	return set
}
