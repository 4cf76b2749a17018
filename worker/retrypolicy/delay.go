package retrypolicy

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"net/http"
	"strings"
	"time"
)

// Delay is how long a transient failure of transaction txID, whose row had attempt, waits before
// its next execution, in a ring of windowMinutes-minute windows: min(L × 2^attempt, MaxDelay),
// jittered into [d/2, d) by a hash of (txID, attempt) — the exact formula is in the package
// documentation. A non-positive window length or MaxDelay gives 0 (the next writable window).
func (p Policy) Delay(windowMinutes, attempt int, txID string) time.Duration {
	d := time.Duration(windowMinutes) * time.Minute
	if d <= 0 || p.MaxDelay <= 0 {
		return 0
	}
	// Doubling stops at the cap, and 2d is never computed past it, so that neither a large
	// attempt nor a max delay near the largest Duration overflows.
	for i := 0; i < attempt && d < p.MaxDelay; i++ {
		if d > p.MaxDelay-d {
			d = p.MaxDelay
		} else {
			d *= 2
		}
	}
	d = min(d, p.MaxDelay)
	half := d / 2
	span := uint64(d - half)
	// floor(span × h / 2^64) is the high word of the 128-bit product, and is below span.
	jitter, _ := bits.Mul64(span, jitterHash(txID, attempt))
	return half + time.Duration(jitter)
}

// jitterHash is h of the package documentation: the first 8 bytes of
// SHA-256(txID || attempt as 8 big-endian bytes), big-endian.
func jitterHash(txID string, attempt int) uint64 {
	buf := make([]byte, len(txID)+8)
	copy(buf, txID)
	binary.BigEndian.PutUint64(buf[len(txID):], uint64(attempt))
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8])
}

// maxDeltaSeconds is what a Retry-After too large to represent counts as, as RFC 9111 section
// 1.2.2 asks of delta-seconds; any cap makes it moot anyway.
const maxDeltaSeconds = 1 << 31

// RetryAfter reads a Retry-After header value (RFC 9110 section 10.2.3) received at now: the
// delay it asks for, and whether value is one. Delta-seconds is a non-empty string of digits
// (so "-5" and "1.5" are not); an HTTP-date already past asks for 0. Surrounding blanks are
// ignored.
func RetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.Trim(value, " \t")
	if value == "" {
		return 0, false
	}
	if secs, ok := deltaSeconds(value); ok {
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// deltaSeconds parses 1*DIGIT, saturating at maxDeltaSeconds.
func deltaSeconds(s string) (int64, bool) {
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int64(c-'0'), maxDeltaSeconds)
	}
	return n, true
}

// WithRetryAfter is the delay to use when the downstream asked for retryAfter (0 when it did
// not ask): the later of the two, capped at MaxDelay, so that a downstream cannot park a step
// beyond the policy's cap.
func (p Policy) WithRetryAfter(delay, retryAfter time.Duration) time.Duration {
	return min(max(delay, retryAfter), p.MaxDelay)
}
