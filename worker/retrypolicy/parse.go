package retrypolicy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultStep is the key of the policy file's entry for every step it does not name.
const DefaultStep = "default"

// Error is a policy file that Parse refused. Its text is "name:line: message", the form editors
// and CI logs link to the line.
type Error struct {
	Name string
	Line int // 0 when the YAML parser named no line
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Name + ": " + e.Msg
	}
	return e.Name + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Load reads and parses the policy file at path; its errors name path as given.
func Load(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Set{}, fmt.Errorf("retrypolicy: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a policy file (see the package documentation) named name in its errors. Every
// error is an *Error.
func Parse(name string, data []byte) (Set, error) {
	ps := parser{name: name}
	root, err := ps.document(data)
	if err != nil {
		return Set{}, err
	}
	entries, err := ps.entries(root)
	if err != nil {
		return Set{}, err
	}
	set := Set{Default: entries[DefaultStep].over(Default())}
	for step, e := range entries {
		if step == DefaultStep {
			continue
		}
		if set.Steps == nil {
			set.Steps = make(map[string]Policy, len(entries))
		}
		set.Steps[step] = e.over(set.Default)
	}
	return set, nil
}

// entry is what one entry of the file sets; zero fields are not set (Parse refuses zeros).
type entry struct {
	maxAttempts int
	maxDelay    time.Duration
	statuses    map[int]OutcomeKind
}

// over is p with what e sets replaced, status by status for the overrides.
func (e entry) over(p Policy) Policy {
	if e.maxAttempts != 0 {
		p.MaxAttempts = e.maxAttempts
	}
	if e.maxDelay != 0 {
		p.MaxDelay = e.maxDelay
	}
	if len(e.statuses) > 0 {
		merged := make(map[int]OutcomeKind, len(p.Statuses)+len(e.statuses))
		maps.Copy(merged, p.Statuses)
		maps.Copy(merged, e.statuses)
		p.Statuses = merged
	}
	return p
}

// The keys of an entry, and the kind each status list gives.
const (
	keyMaxAttempts = "max_attempts"
	keyMaxDelay    = "max_delay"
)

var statusKeys = map[string]OutcomeKind{
	"done_statuses":      Done,
	"permanent_statuses": Permanent,
	"transient_statuses": Transient,
}

const entryKeys = "max_attempts, max_delay, done_statuses, permanent_statuses, transient_statuses"

type parser struct{ name string }

func (ps parser) errorf(n *yaml.Node, format string, args ...any) error {
	return &Error{Name: ps.name, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// yamlLine is how the YAML library says where a syntax error is.
var yamlLine = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// syntaxError restates the YAML library's error in the file's own "name:line:" form.
func (ps parser) syntaxError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Name: ps.name, Line: line, Msg: m[2]}
	}
	return &Error{Name: ps.name, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// document is the root node of data's only YAML document, nil when there is none (an empty
// file, only comments, or a null).
func (ps parser) document(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, ps.syntaxError(err)
	}
	// A second document would be ignored silently by a plain Unmarshal.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, ps.errorf(&next, "more than one YAML document")
	} else if !errors.Is(err, io.EOF) {
		return nil, ps.syntaxError(err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, nil
	}
	return doc.Content[0], nil
}

// entries parses every entry of root, in the file's order, so that the first error reported
// is the first in the file.
func (ps parser) entries(root *yaml.Node) (map[string]entry, error) {
	entries := map[string]entry{}
	if root == nil {
		return entries, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, ps.errorf(root, "want a mapping of step names (stacksaga_impl_type) to policies, not %s", describe(root))
	}
	lines := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, ps.errorf(k, "a step name must be a non-empty string, not %s", describe(k))
		}
		if first, dup := lines[k.Value]; dup {
			return nil, ps.errorf(k, "step %q is given twice (first at line %d)", k.Value, first)
		}
		lines[k.Value] = k.Line
		e, err := ps.entry(resolve(v))
		if err != nil {
			return nil, err
		}
		entries[k.Value] = e
	}
	return entries, nil
}

// listed is where a status was put in one entry, to name both places of a conflict.
type listed struct {
	key  string
	line int
}

func (ps parser) entry(n *yaml.Node) (entry, error) {
	var e entry
	if isNull(n) {
		return e, nil // "Payment:" alone: everything from default
	}
	if n.Kind != yaml.MappingNode {
		return e, ps.errorf(n, "want a mapping of %s, not %s", entryKeys, describe(n))
	}
	keys := map[string]int{}
	where := map[int]listed{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if first, dup := keys[k.Value]; dup {
			return e, ps.errorf(k, "%s is given twice (first at line %d)", k.Value, first)
		}
		keys[k.Value] = k.Line
		var err error
		switch class, isList := statusKeys[k.Value]; {
		case k.Value == keyMaxAttempts:
			e.maxAttempts, err = ps.maxAttempts(v)
		case k.Value == keyMaxDelay:
			e.maxDelay, err = ps.maxDelay(v)
		case isList:
			if e.statuses == nil {
				e.statuses = map[int]OutcomeKind{}
			}
			err = ps.statuses(k.Value, class, v, e.statuses, where)
		default:
			err = ps.errorf(k, "unknown key %q (want one of %s)", k.Value, entryKeys)
		}
		if err != nil {
			return e, err
		}
	}
	return e, nil
}

func (ps parser) maxAttempts(n *yaml.Node) (int, error) {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, ps.errorf(n, "%s: %s is not an integer", keyMaxAttempts, describe(n))
	}
	if v <= 0 {
		return 0, ps.errorf(n, "%s: %d must be positive", keyMaxAttempts, v)
	}
	return v, nil
}

func (ps parser) maxDelay(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, ps.errorf(n, "%s: %s is not a duration", keyMaxDelay, describe(n))
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, ps.errorf(n, "%s: %q is not a duration", keyMaxDelay, n.Value)
	}
	if d <= 0 {
		return 0, ps.errorf(n, "%s: %q must be positive", keyMaxDelay, n.Value)
	}
	return d, nil
}

// statuses adds the list n under key to into, refusing a status that where says another list
// of the same entry already holds.
func (ps parser) statuses(key string, class OutcomeKind, n *yaml.Node, into map[int]OutcomeKind, where map[int]listed) error {
	if n.Kind != yaml.SequenceNode {
		return ps.errorf(n, "%s: want a list of HTTP statuses, not %s", key, describe(n))
	}
	for _, item := range n.Content {
		item = resolve(item)
		var code int
		if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!int" || item.Decode(&code) != nil {
			return ps.errorf(item, "%s: %s is not an HTTP status", key, describe(item))
		}
		if code < 100 || code > 599 {
			return ps.errorf(item, "%s: %d is not an HTTP status (100..599)", key, code)
		}
		if isSuccess(code) && class != Done {
			return ps.errorf(item, "%s: %d is a success (2xx), which is always done", key, code)
		}
		if w, ok := where[code]; ok && w.key != key {
			return ps.errorf(item, "%s: %d is also in %s (line %d)", key, code, w.key, w.line)
		}
		where[code] = listed{key: key, line: item.Line}
		into[code] = class
	}
	return nil
}

// resolve follows an alias to its anchored node. Parse only ever descends a fixed depth (file,
// entry, list, status), so an alias to an enclosing node cannot make it loop.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// describe names a node in an error: a scalar by its text, anything else by its kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "an alias"
	}
}
