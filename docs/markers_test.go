package docs

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A block is a fenced block of a Markdown file with the marker on the line before it.
type block struct {
	file  string // the file's path from the module root, for messages
	line  int    // line of the opening fence (1-based)
	name  string
	lang  string // the fence's info string
	text  string // the lines between the fences
	h2    string // the second-level heading the block is under
	mode  blockMode
	retry time.Duration // runnable blocks: run again until exit 0, at most this long
	limit time.Duration // runnable blocks: the timeout of one run
	// reason says why a rendered block is not run.
	reason string
}

type blockMode int

const (
	unmarked blockMode = iota
	runnable
	background
	rendered
)

func (b block) String() string { return fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.name) }

// defaultLimit bounds one run of a runnable block without timeout=.
const defaultLimit = 2 * time.Minute

var (
	markerLine = regexp.MustCompile(`^<!--\s*(runnable|rendered):\s*(.*?)\s*-->$`)
	blockName  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

// parseBlocks returns every fenced block of a Markdown file, marked or not, in order. A marker not
// followed by a fence, a malformed marker or a name used twice is an error naming the line.
func parseBlocks(file, markdown string) ([]block, error) {
	lines := strings.Split(markdown, "\n")
	var (
		blocks  []block
		pending *block // the marker of the previous line
		h2      string
		names   = map[string]int{}
	)
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], " \t\r")
		trimmed := strings.TrimLeft(line, " ")
		if m := markerLine.FindStringSubmatch(trimmed); m != nil {
			b, err := parseMarker(m[1], m[2])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
			}
			if first, dup := names[b.name]; dup {
				return nil, fmt.Errorf("%s:%d: block name %q is already used on line %d", file, i+1, b.name, first)
			}
			names[b.name] = i + 1
			pending = &b
			continue
		}
		fence, isFence := fenceOf(trimmed)
		if pending != nil && !isFence {
			return nil, fmt.Errorf("%s:%d: the marker of %q must be on the line right before a ``` fence", file, i, pending.name)
		}
		if !isFence {
			if strings.HasPrefix(line, "## ") {
				h2 = strings.TrimPrefix(line, "## ")
			}
			continue
		}
		b := block{}
		if pending != nil {
			b = *pending
			pending = nil
		}
		b.file, b.line, b.h2 = file, i+1, h2
		b.lang = strings.TrimSpace(strings.TrimLeft(trimmed, "`"))
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); strings.HasPrefix(t, fence) && strings.Trim(t, "`") == "" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the fence opened here is never closed", file, b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s: the marker of %q is the file's last line: it must be right before a ``` fence", file, pending.name)
	}
	return blocks, nil
}

// fenceOf reports whether a line opens a fenced block, and its fence (the run of backticks).
func fenceOf(trimmed string) (string, bool) {
	n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
	if n < 3 {
		return "", false
	}
	return trimmed[:n], true
}

// parseMarker reads the part of a marker after "runnable:" or "rendered:".
func parseMarker(kind, rest string) (block, error) {
	if kind == "rendered" {
		name, reason, ok := strings.Cut(rest, ":")
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		if !ok || reason == "" {
			return block{}, fmt.Errorf("marker %q: write <!-- rendered: NAME: REASON --> (why it cannot run here)", rest)
		}
		if !blockName.MatchString(name) {
			return block{}, fmt.Errorf("marker %q: the name %q is not [a-z0-9-]", rest, name)
		}
		return block{name: name, mode: rendered, reason: reason}, nil
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || !blockName.MatchString(fields[0]) {
		return block{}, fmt.Errorf("marker %q: write <!-- runnable: NAME [background] [retry=DURATION] [timeout=DURATION] --> with a NAME of [a-z0-9-]", rest)
	}
	b := block{name: fields[0], mode: runnable, limit: defaultLimit}
	for _, opt := range fields[1:] {
		key, value, _ := strings.Cut(opt, "=")
		switch key {
		case "background":
			b.mode = background
		case "retry", "timeout":
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return block{}, fmt.Errorf("marker of %q: %s=%q is not a positive duration (e.g. 30s)", b.name, key, value)
			}
			if key == "retry" {
				b.retry = d
			} else {
				b.limit = d
			}
		default:
			return block{}, fmt.Errorf("marker of %q: unknown option %q (background, retry=DURATION, timeout=DURATION)", b.name, opt)
		}
	}
	if b.mode == background && b.retry > 0 {
		return block{}, fmt.Errorf("marker of %q: a background block cannot be retried (its processes would start twice)", b.name)
	}
	return b, nil
}

// isCommandBlock reports whether a fence holds shell commands: no language, or a shell's.
func isCommandBlock(b block) bool {
	switch b.lang {
	case "", "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// unmarkedCommands returns the command blocks under the given second-level headings (by prefix)
// that carry no marker.
func unmarkedCommands(blocks []block, sections []string) []block {
	var out []block
	for _, b := range blocks {
		if b.mode != unmarked || !isCommandBlock(b) {
			continue
		}
		for _, s := range sections {
			if strings.HasPrefix(b.h2, s) {
				out = append(out, b)
				break
			}
		}
	}
	return out
}
