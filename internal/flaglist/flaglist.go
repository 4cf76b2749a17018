package flaglist

import "strings"

// Split is the items of the comma-separated list s, trimmed, without the empty ones; nil when
// there is none (an unset flag).
func Split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
