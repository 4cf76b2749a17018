package proc

import "testing"

func TestStatState(t *testing.T) {
	cases := []struct {
		stat  string
		state byte
		ok    bool
	}{
		{"4242 (retryring) S 1 4242 4242 0 -1 4194560 3316", 'S', true},
		{"4242 (retryring) T 1 4242", 'T', true},
		{"4243 (retryring) t 1 4242", 't', true}, // tracing stop (under a debugger): stopped too
		{"4244 (a) b) (c) Z 1 4242", 'Z', true},  // a command name with blanks and parentheses
		{"4245 (x)", 0, false},                   // nothing after the name
		{"4245 (x) ", 0, false},                  // a blank and no state
		{"4246 retryring S 1", 0, false},         // no name in parentheses
		{"", 0, false},
	}
	for _, c := range cases {
		state, ok := statState([]byte(c.stat))
		if state != c.state || ok != c.ok {
			t.Errorf("statState(%q) = %q, %v; want %q, %v", c.stat, state, ok, c.state, c.ok)
		}
	}
}
