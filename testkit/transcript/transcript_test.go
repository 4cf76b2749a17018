package transcript

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// reported collects what run reports instead of failing the test.
type reported []string

func (e *reported) Errorf(format string, args ...any) { *e = append(*e, fmt.Sprintf(format, args...)) }

// echo prints its arguments, one per line; "fail" is a misuse.
func echo(c Command) (string, error) {
	if c.Name == "fail" {
		return "", fmt.Errorf("no such command")
	}
	return strings.Join(c.Args, "\n"), nil
}

func write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const wrong = `# the first block is right, the second wrong, the third has no output yet
echo a b
----
a
b

echo c
----
not c

echo
----
`

func TestAWrongExpectationFails(t *testing.T) {
	var errs reported
	if err := run(&errs, write(t, wrong), echo, false); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "t.txt:7: echo c") || !strings.Contains(errs[0], "--- want\nnot c\n--- got\nc") {
		t.Fatalf("reported %q, want one mismatch at line 7", errs)
	}
}

func TestRewriteWritesTheOutputsAndKeepsTheRest(t *testing.T) {
	path := write(t, wrong)
	var errs reported
	if err := run(&errs, path, echo, true); err != nil || len(errs) != 0 {
		t.Fatalf("rewrite: %v %q", err, errs)
	}
	b, _ := os.ReadFile(path)
	want := strings.Replace(wrong, "not c", "c", 1)
	if string(b) != want {
		t.Fatalf("rewritten file:\n%s\nwant:\n%s", b, want)
	}
	if err := run(&errs, path, echo, false); err != nil || len(errs) != 0 {
		t.Fatalf("the rewritten file does not pass: %v %q", err, errs)
	}
}

func TestMalformedTranscriptsAndMisusesStopTheFile(t *testing.T) {
	for _, text := range []string{
		"echo a\nno separator\n",
		"fail\n----\n",
		"echo a  \n----\na\n",
	} {
		var errs reported
		err := run(&errs, write(t, text), func(c Command) (string, error) {
			if c.Name == "echo" && len(c.Args) == 1 {
				return "a\n\nb", nil // a blank line inside an output
			}
			return echo(c)
		}, false)
		if err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}

func TestFormatRing(t *testing.T) {
	k := lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}
	s := fsm.NewState()
	for _, c := range []fsm.Command{
		&fsm.Join{Ring: k, WorkerID: "a", Incarnation: "1"},
		&fsm.Assign{Ring: k, Assignments: []fsm.Assignment{{WorkerID: "a", Incarnation: "1", Epoch: 1, NodeCount: 1, Ranges: lease.Ranges{lease.Split(1)[0]}}}},
		&fsm.Join{Ring: k, WorkerID: "b", Incarnation: "1"},
		&fsm.Assign{Ring: k, Assignments: []fsm.Assignment{{WorkerID: "a", Incarnation: "1", Epoch: 2, NodeCount: 2, Ranges: lease.Ranges{lease.Split(2)[0]}}}},
	} {
		if err := s.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	want := `generation 2, last epoch 2
a/1 active e2 node 0/2 [min,-1]
  holds e1 [0,max]
b/1 active, nothing assigned`
	if got := FormatRing(s.Ring(k)); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
