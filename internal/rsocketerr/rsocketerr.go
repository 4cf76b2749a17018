package rsocketerr

import "strings"

// rsocket-go's wrappers of a failed read, as its texts spell them.
const (
	readFirstFrame = "read first frame failed"
	readFrame      = "read frame failed"
	decodeFrame    = "decode frame failed"
)

// BeforeFirstFrame starts every Readable line about a connection that ended before its first
// frame was read.
const BeforeFirstFrame = "connection closed before its first frame"

// Readable is msg, an rsocket-go error or log text, on one line with each wrapper once: a
// failure of the first frame reads "connection closed before its first frame: CAUSE".
func Readable(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	// "read frame failed:" is wrapped with ": ", which doubles its colon.
	msg = strings.ReplaceAll(msg, ":: ", ": ")
	parts := strings.Split(strings.TrimSuffix(msg, ":"), ": ")
	kept := parts[:0]
	for _, p := range parts {
		if len(kept) > 0 && (p == kept[len(kept)-1] || (p == readFrame && kept[len(kept)-1] == readFirstFrame)) {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) > 1 && kept[0] == readFirstFrame {
		cause := kept[1:]
		if cause[0] == decodeFrame && len(cause) > 1 {
			return "connection closed: its first frame could not be decoded: " + strings.Join(cause[1:], ": ")
		}
		return BeforeFirstFrame + ": " + strings.Join(cause, ": ")
	}
	return strings.Join(kept, ": ")
}
