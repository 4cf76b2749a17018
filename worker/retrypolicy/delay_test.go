package retrypolicy

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/retryring/retryring/window"
)

// unjittered is d of the package documentation, computed the obvious way for small inputs.
func unjittered(l, attempt int, maxDelay time.Duration) time.Duration {
	d := time.Duration(l) * time.Minute
	for range attempt {
		d *= 2
		if d >= maxDelay {
			return maxDelay
		}
	}
	return min(d, maxDelay)
}

func TestDelayIsWithinHalfToFullBackoff(t *testing.T) {
	p := Default()
	for _, l := range []int{1, 5, 60, 1440} {
		for attempt := range 12 {
			d := unjittered(l, attempt, p.MaxDelay)
			for i := range 200 {
				tx := fmt.Sprintf("tx-%d", i)
				got := p.Delay(l, attempt, tx)
				if got < d/2 || got >= d {
					t.Fatalf("Delay(L=%d, attempt=%d, %s) = %v, want in [%v, %v)", l, attempt, tx, got, d/2, d)
				}
			}
		}
	}
}

func TestDelayIsDeterministic(t *testing.T) {
	p := Default()
	for i := range 100 {
		tx := fmt.Sprintf("tx-%d", i)
		if a, b := p.Delay(1, 3, tx), p.Delay(1, 3, tx); a != b {
			t.Fatalf("%s: %v then %v", tx, a, b)
		}
	}
}

// TestDelayKnownAnswers pins the documented formula: these figures come from an independent
// Python rendering of it (hashlib.sha256, struct.pack(">q", attempt), integer arithmetic).
func TestDelayKnownAnswers(t *testing.T) {
	cases := []struct {
		l, attempt int
		tx         string
		want       time.Duration
	}{
		{1, 0, "tx-1", 50763666526},
		{1, 2, "tx-1", 199576714446},
		{5, 3, "order-42:Payment", 2134017027305},
		{1, 20, "ü-unicode", 2226575865009},
	}
	p := Default()
	for _, c := range cases {
		if got := p.Delay(c.l, c.attempt, c.tx); got != c.want {
			t.Errorf("Delay(%d, %d, %q) = %d, want %d", c.l, c.attempt, c.tx, got, c.want)
		}
	}
}

// TestDelaySpreadsAnOutageMinute: the failures of one minute, executed over that minute, land in
// several later windows, and the jitter alone splits them about evenly over [d/2, d).
func TestDelaySpreadsAnOutageMinute(t *testing.T) {
	p := Default()
	minute := time.Date(2026, 3, 9, 10, 15, 0, 0, time.UTC)
	windows := map[window.Window]int{}
	lowerHalf := 0
	const n = 1000
	for i := range n {
		tx := fmt.Sprintf("tx-%04d", i)
		d := p.Delay(1, 2, tx) // d = 4 minutes: [2m, 4m)
		if d < 3*time.Minute {
			lowerHalf++
		}
		now := minute.Add(time.Duration(i) * time.Minute / n)
		w, err := window.Ahead(now, 1, d)
		if err != nil {
			t.Fatal(err)
		}
		windows[w]++
	}
	if len(windows) < 3 {
		t.Errorf("%d failures of one minute went to %d windows, want at least 3: %v", n, len(windows), windows)
	}
	if lowerHalf < 400 || lowerHalf > 600 {
		t.Errorf("%d of %d delays in [2m, 3m), want about half", lowerHalf, n)
	}

	// At a later attempt one instant's failures alone cover several windows.
	windows = map[window.Window]int{}
	for i := range n {
		w, err := window.Ahead(minute, 1, p.Delay(1, 4, fmt.Sprintf("tx-%04d", i))) // [8m, 16m)
		if err != nil {
			t.Fatal(err)
		}
		windows[w]++
	}
	if len(windows) != 8 {
		t.Errorf("attempt 4 from one instant: %d windows, want the 8 of [8m, 16m): %v", len(windows), windows)
	}
}

func TestDelayCap(t *testing.T) {
	p := Default()
	for _, attempt := range []int{6, 10, 62, 63, 64, 1000, math.MaxInt} {
		if got := p.Delay(1, attempt, "tx"); got < 30*time.Minute || got >= time.Hour {
			t.Errorf("attempt %d: %v, want in [30m, 60m)", attempt, got)
		}
	}
	huge := Policy{MaxDelay: math.MaxInt64}
	if got := huge.Delay(1440, 100, "tx"); got < math.MaxInt64/2 {
		t.Errorf("a cap near the largest Duration: %v, want at least half of it (no overflow)", got)
	}
	if got := (Policy{MaxDelay: time.Hour}).Delay(0, 3, "tx"); got != 0 {
		t.Errorf("no window length: %v, want 0", got)
	}
	if got := (Policy{}).Delay(1, 3, "tx"); got != 0 {
		t.Errorf("no max delay: %v, want 0", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 9, 10, 15, 0, 0, time.UTC)
	good := []struct {
		value string
		want  time.Duration
	}{
		{"120", 120 * time.Second},
		{"0", 0},
		{" \t5 ", 5 * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"Monday, 09-Mar-26 10:20:00 GMT", 5 * time.Minute}, // RFC 850, obsolete but valid
		{"Mon Mar  9 10:16:00 2026", time.Minute},           // asctime
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},    // already past: no wait
		{"99999999999999999999999", maxDeltaSeconds * time.Second},
	}
	for _, c := range good {
		got, ok := RetryAfter(c.value, now)
		if !ok || got != c.want {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, true", c.value, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", " ", "soon", "-5", "+5", "1.5", "5s", "0x10", "1e3", "Mon, 32 Mar 2026 10:15:00 GMT", "2026-03-09T10:16:00Z"} {
		if got, ok := RetryAfter(bad, now); ok {
			t.Errorf("RetryAfter(%q) = %v, true; want it ignored", bad, got)
		}
	}
}

func TestWithRetryAfter(t *testing.T) {
	p := Default()
	cases := []struct{ delay, retryAfter, want time.Duration }{
		{5 * time.Minute, 0, 5 * time.Minute},                       // none asked
		{5 * time.Minute, time.Minute, 5 * time.Minute},             // the backoff is later already
		{5 * time.Minute, 20 * time.Minute, 20 * time.Minute},       // no earlier than asked
		{5 * time.Minute, 3 * time.Hour, time.Hour},                 // capped at max_delay
		{5 * time.Minute, maxDeltaSeconds * time.Second, time.Hour}, // the largest Retry-After too
	}
	for _, c := range cases {
		if got := p.WithRetryAfter(c.delay, c.retryAfter); got != c.want {
			t.Errorf("WithRetryAfter(%v, %v) = %v, want %v", c.delay, c.retryAfter, got, c.want)
		}
	}
}
