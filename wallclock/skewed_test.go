//go:build skewclock

package wallclock

import (
	"errors"
	"testing"
	"time"
)

func TestParseSkew(t *testing.T) {
	for _, c := range []struct {
		v    string
		set  bool
		want time.Duration
		bad  bool
	}{
		{"", false, 0, false},
		{"", true, 0, false},
		{"-900ms", true, -900 * time.Millisecond, false},
		{"1.5s", true, 1500 * time.Millisecond, false},
		{"23h59m", true, 23*time.Hour + 59*time.Minute, false},
		{"900", true, 0, true}, // no unit
		{"soon", true, 0, true},
		{"24h", true, 0, true},
		{"-48h", true, 0, true},
	} {
		got, err := parseSkew(c.v, c.set)
		if c.bad {
			if !errors.Is(err, ErrSkew) {
				t.Errorf("parseSkew(%q) = %v, %v; want ErrSkew", c.v, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseSkew(%q) = %v, %v; want %v", c.v, got, err, c.want)
		}
	}
}

// Now moves the wall-clock reading by the skew and keeps the monotonic one consistent with it:
// a duration between two readings stays real.
func TestNowCarriesTheSkew(t *testing.T) {
	if skew == 0 {
		t.Skipf("run with %s set to see the skew", SkewEnv)
	}
	before := time.Now()
	now := Now()
	if d := now.Round(0).Sub(before.Round(0)); d < skew {
		t.Fatalf("wall reading %v is %v past the host's, want at least the skew %v", now, d, skew)
	}
	if d := Now().Sub(now); d < 0 {
		t.Fatalf("two readings went backwards by %v", -d)
	}
}
