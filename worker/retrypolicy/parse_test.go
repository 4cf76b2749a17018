package retrypolicy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadTheExampleFile(t *testing.T) {
	got, err := Load(filepath.Join("testdata", "retry-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def := Policy{MaxAttempts: 8, MaxDelay: 30 * time.Minute, Statuses: map[int]OutcomeKind{503: Permanent}}
	want := Set{
		Default: def,
		Steps: map[string]Policy{
			// A step inherits what it does not set; its status lists merge with default's.
			"Payment":   {MaxAttempts: 5, MaxDelay: 30 * time.Minute, Statuses: map[int]OutcomeKind{503: Permanent, 409: Transient}},
			"Inventory": {MaxAttempts: 8, MaxDelay: 2 * time.Hour, Statuses: map[int]OutcomeKind{503: Transient, 404: Done}},
			"Shipping":  def,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load:\n got %+v\nwant %+v", got, want)
	}
	if p := got.For("Payment"); p.Classify(409) != Transient || p.Classify(503) != Permanent || p.Classify(404) != Permanent {
		t.Errorf("Payment classifies 409, 503, 404 as %v, %v, %v", p.Classify(409), p.Classify(503), p.Classify(404))
	}
	if p := got.For("Unlisted"); !reflect.DeepEqual(p, def) {
		t.Errorf("a step not in the file gets %+v, want default %+v", p, def)
	}
}

func TestParseBuiltInDefaults(t *testing.T) {
	for name, data := range map[string]string{
		"empty":          "",
		"comments only":  "# nothing yet\n",
		"empty document": "---\n",
		"null":           "~\n",
		"empty mapping":  "{}\n",
		"empty default":  "default:\n",
	} {
		got, err := Parse("p.yaml", []byte(data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, Set{Default: Default()}) {
			t.Errorf("%s: %+v, want the built-in defaults", name, got)
		}
	}

	got, err := Parse("p.yaml", []byte("Payment:\n  max_attempts: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Set{Default: Default(), Steps: map[string]Policy{"Payment": {MaxAttempts: 3, MaxDelay: DefaultMaxDelay}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("no default entry: %+v, want %+v", got, want)
	}
}

func TestParseFollowsAliases(t *testing.T) {
	data := "default: &std\n  max_attempts: 4\n  done_statuses: &gone [404, 410]\nPayment: *std\nInventory:\n  transient_statuses: *gone\n"
	got, err := Parse("p.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if p := got.For("Payment"); p.MaxAttempts != 4 || p.Classify(410) != Done {
		t.Errorf("Payment: %+v", p)
	}
	if p := got.For("Inventory"); p.Classify(404) != Transient {
		t.Errorf("Inventory: %+v", p)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, data string
		line       int
		msg        string // the whole message after "p.yaml:line: ", or its start when it ends in "..."
	}{
		{"unknown key", "default:\n  max_attempt: 3\n", 2, `unknown key "max_attempt" (want one of max_attempts, max_delay, done_statuses, permanent_statuses, transient_statuses)`},
		{"merge key", "Payment:\n  <<: {max_attempts: 3}\n", 2, `unknown key "<<"...`},
		{"bad duration", "Payment:\n  max_attempts: 3\n  max_delay: 5x\n", 3, `max_delay: "5x" is not a duration`},
		{"duration without unit", "Payment:\n  max_delay: 60\n", 2, `max_delay: "60" is not a duration`},
		{"zero duration", "Payment:\n  max_delay: 0s\n", 2, `max_delay: "0s" must be positive`},
		{"negative duration", "Payment:\n  max_delay: -1m\n", 2, `max_delay: "-1m" must be positive`},
		{"duration list", "Payment:\n  max_delay: [1m]\n", 2, `max_delay: a list is not a duration`},
		{"zero attempts", "default:\n  max_attempts: 0\n", 2, `max_attempts: 0 must be positive`},
		{"negative attempts", "\n\ndefault:\n  max_attempts: -2\n", 4, `max_attempts: -2 must be positive`},
		{"word attempts", "default:\n  max_attempts: ten\n", 2, `max_attempts: "ten" is not an integer`},
		{"quoted attempts", "default:\n  max_attempts: \"10\"\n", 2, `max_attempts: "10" is not an integer`},
		{"fractional attempts", "default:\n  max_attempts: 2.5\n", 2, `max_attempts: "2.5" is not an integer`},
		{"status too large", "Payment:\n  done_statuses: [404, 700]\n", 2, `done_statuses: 700 is not an HTTP status (100..599)`},
		{"status too small", "Payment:\n  transient_statuses:\n    - 99\n", 3, `transient_statuses: 99 is not an HTTP status (100..599)`},
		{"status word", "Payment:\n  done_statuses: [conflict]\n", 2, `done_statuses: "conflict" is not an HTTP status`},
		{"status quoted", "Payment:\n  done_statuses: [\"409\"]\n", 2, `done_statuses: "409" is not an HTTP status`},
		{"status not a list", "Payment:\n  done_statuses: 409\n", 2, `done_statuses: want a list of HTTP statuses, not "409"`},
		{"status in two classes", "Payment:\n  done_statuses: [409]\n  transient_statuses:\n    - 500\n    - 409\n", 5, `transient_statuses: 409 is also in done_statuses (line 2)`},
		{"2xx permanent", "Payment:\n  permanent_statuses: [204]\n", 2, `permanent_statuses: 204 is a success (2xx), which is always done`},
		{"2xx transient", "Payment:\n  transient_statuses: [202]\n", 2, `transient_statuses: 202 is a success (2xx), which is always done`},
		{"key twice", "Payment:\n  max_attempts: 3\n  max_attempts: 4\n", 3, `max_attempts is given twice (first at line 2)`},
		{"step twice", "Payment: {}\nInventory: {}\nPayment: {}\n", 3, `step "Payment" is given twice (first at line 1)`},
		{"root a list", "- Payment\n", 1, `want a mapping of step names (stacksaga_impl_type) to policies, not a list`},
		{"entry a number", "default: {}\nPayment: 5\n", 2, `want a mapping of max_attempts, max_delay, done_statuses, permanent_statuses, transient_statuses, not "5"`},
		{"empty step name", "\"\": {}\n", 1, `a step name must be a non-empty string, not ""`},
		{"two documents", "default: {}\n---\nPayment: {}\n", 2, `more than one YAML document`},
		{"syntax", "Payment:\n  max_attempts: 3\n   max_delay: 1m\n", 3, `mapping values are not allowed in this context`},
		{"syntax in a later document", "default: {}\n---\nPayment: [\n", 3, `did not find expected node content`},
	}
	for _, c := range cases {
		_, err := Parse("p.yaml", []byte(c.data))
		var perr *Error
		if !errors.As(err, &perr) {
			t.Errorf("%s: error %v, want an *Error", c.name, err)
			continue
		}
		if perr.Name != "p.yaml" || perr.Line != c.line {
			t.Errorf("%s: %v, want line %d", c.name, err, c.line)
		}
		prefix, exact := strings.CutSuffix(c.msg, "...")
		if exact = !exact; (exact && perr.Msg != c.msg) || !strings.HasPrefix(perr.Msg, prefix) {
			t.Errorf("%s: message %q, want %q", c.name, perr.Msg, c.msg)
		}
	}
}

func TestErrorText(t *testing.T) {
	_, err := Parse("retry-policy.yaml", []byte("default:\n  max_attempts: 3\n\nPayment:\n  max_attempts: 2\n\n  max_delay: 5x\n"))
	if err == nil || err.Error() != `retry-policy.yaml:7: max_delay: "5x" is not a duration` {
		t.Errorf("error %v", err)
	}
	// The YAML library names no line for an unknown anchor.
	_, err = Parse("retry-policy.yaml", []byte("Payment: *nope\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "retry-policy.yaml: ") {
		t.Errorf("error %v, want the file named without a line", err)
	}
}

func TestLoadNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("default:\n  max_attempts: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: ") {
		t.Errorf("Load: %v, want it to name %s:2", err, path)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}
