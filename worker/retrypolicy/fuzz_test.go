package retrypolicy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics, every refusal is an *Error naming the file, and whatever it
// accepts is a policy the worker can use as it is. The seed corpus is testdata/fuzz/FuzzParse
// and the example file.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "retry-policy.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("f.yaml", data)
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) || perr.Name != "f.yaml" {
				t.Fatalf("error %v (%T), want an *Error naming f.yaml", err, err)
			}
			return
		}
		checkUsable(t, "default", set.Default)
		for step, p := range set.Steps {
			checkUsable(t, step, p)
		}
	})
}

func checkUsable(t *testing.T, step string, p Policy) {
	t.Helper()
	if p.MaxAttempts <= 0 || p.MaxDelay <= 0 {
		t.Fatalf("%s: %+v has no attempts or no delay", step, p)
	}
	for code, class := range p.Statuses {
		if code < 100 || code > 599 || class < Done || class > Permanent || (isSuccess(code) && class != Done) {
			t.Fatalf("%s: status %d overridden to %v", step, code, class)
		}
	}
	if d := p.Delay(1, 3, "tx"); d <= 0 || d > p.MaxDelay {
		t.Fatalf("%s: delay %v outside (0, %v]", step, d, p.MaxDelay)
	}
}
