package benchkit

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func TestProgramName(t *testing.T) {
	for path, want := range map[string]string{
		"/tmp/go-build123/b001/exe/rss": "rss", // go run ./bench/rss
		"./bin/flood":                   "flood",
		"stepdown":                      "stepdown",
	} {
		if got := programName(path); got != want {
			t.Errorf("programName(%q) = %q, want %q", path, got, want)
		}
	}
}

const failHelperEnv = "BENCHKIT_FAIL_HELPER"

// TestFailAndLogfLines runs this test binary again as a benchmark program that logs one progress
// line and fails: what every benchmark program prints on stderr, and its exit status.
func TestFailAndLogfLines(t *testing.T) {
	if os.Getenv(failHelperEnv) == "1" {
		Logf("phase %d of %s", 2, "drain")
		Fail(errors.New("no lease within 30s"))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailAndLogfLines$")
	cmd.Env = append(os.Environ(), failHelperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the failing program ended with %v, want exit status 1; stderr:\n%s", err, stderr.String())
	}
	name := programName(os.Args[0])
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	logLine := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d ` + regexp.QuoteMeta(name) + `: phase 2 of drain$`)
	if len(lines) != 2 || !logLine.MatchString(lines[0]) || lines[1] != name+": no lease within 30s" {
		t.Fatalf("stderr:\n%s\nwant a time-stamped %q line, then %q", stderr.String(), name+": phase 2 of drain", name+": no lease within 30s")
	}
}
