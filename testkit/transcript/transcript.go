package transcript

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write the outputs of transcript commands into their files instead of checking them")

// Command is one command line of a transcript: its name and its arguments, split at blanks.
type Command struct {
	Name string
	Args []string
}

func (c Command) String() string { return strings.Join(append([]string{c.Name}, c.Args...), " ") }

// Driver runs one command and returns what it printed. An error means the transcript misused the
// driver (an unknown command, a bad argument); it stops the file. What the code under test refuses
// belongs in the output.
type Driver func(c Command) (string, error)

// RunDir runs every *.txt file of dir as a subtest named after the file, each with a fresh driver.
func RunDir(t *testing.T, dir string, newDriver func() Driver) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in %s (%v)", dir, err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			Run(t, f, newDriver())
		})
	}
}

// Run runs the transcript in path with do.
func Run(t *testing.T, path string, do Driver) {
	t.Helper()
	if err := run(t, path, do, *rewrite); err != nil {
		t.Fatal(err)
	}
}

// reporter is the part of testing.T that run reports mismatches to.
type reporter interface {
	Errorf(format string, args ...any)
}

// block is one command of a file and the lines of its expected output, lines[from:to].
type block struct {
	cmd      Command
	line     int // of the command, 1-based
	from, to int
}

// run checks (or, with rewrite, writes) the outputs of the transcript in path. It returns an error
// when the file cannot be read or parsed, or the driver refused a command.
func run(r reporter, path string, do Driver, rewrite bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	blocks, err := parse(path, lines)
	if err != nil {
		return err
	}
	var out []string
	next := 0 // first line of lines not yet copied to out
	for _, bl := range blocks {
		got, err := do(bl.cmd)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, bl.line, bl.cmd, err)
		}
		got = strings.TrimRight(got, "\n")
		gotLines := strings.Split(got, "\n")
		if got == "" {
			gotLines = nil
		}
		for _, l := range gotLines {
			if strings.TrimSpace(l) == "" {
				return fmt.Errorf("%s:%d: %s: the output has a blank line, which would end the block:\n%s", path, bl.line, bl.cmd, got)
			}
		}
		if want := strings.Join(lines[bl.from:bl.to], "\n"); !rewrite && got != want {
			r.Errorf("%s:%d: %s\n--- want\n%s\n--- got\n%s", path, bl.line, bl.cmd, want, got)
		}
		out = append(append(out, lines[next:bl.from]...), gotLines...)
		next = bl.to
	}
	if !rewrite {
		return nil
	}
	out = append(out, lines[next:]...)
	return os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644)
}

// parse finds the blocks of a transcript: a command line, a line "----", then output lines up to
// a blank line or the end of the file.
func parse(path string, lines []string) ([]block, error) {
	var blocks []block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			return nil, fmt.Errorf("%s:%d: %q is not followed by a line ----", path, i+1, l)
		}
		f := strings.Fields(l)
		bl := block{cmd: Command{Name: f[0], Args: f[1:]}, line: i + 1, from: i + 2}
		bl.to = bl.from
		for bl.to < len(lines) && strings.TrimSpace(lines[bl.to]) != "" {
			bl.to++
		}
		blocks = append(blocks, bl)
		i = bl.to
	}
	return blocks, nil
}
