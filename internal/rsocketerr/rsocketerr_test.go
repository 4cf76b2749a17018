package rsocketerr

import "testing"

// TestReadable: the lines rsocket-go v0.8.16 logs and returns, as a coordinator and a worker
// printed them, read once each.
func TestReadable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"read first frame failed: read first frame failed: EOF\n", "connection closed before its first frame: EOF"},
		{"read first frame failed: read first frame failed: read frame failed:: read tcp 127.0.0.1:27602->127.0.0.1:44250: i/o timeout\n",
			"connection closed before its first frame: read tcp 127.0.0.1:27602->127.0.0.1:44250: i/o timeout"},
		{"read first frame failed: read first frame failed: read frame failed:: incomplete frame header\n",
			"connection closed before its first frame: incomplete frame header"},
		{"read first frame failed: read first frame failed: decode frame failed:: invalid frame type",
			"connection closed: its first frame could not be decoded: invalid frame type"},
		{"read frame failed:: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer",
			"read frame failed: read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"},
		{"send frame failed: write: broken pipe\n", "send frame failed: write: broken pipe"},
		{"read frame failed:", "read frame failed"},
		{"", ""},
	} {
		if got := Readable(tc.in); got != tc.want {
			t.Errorf("Readable(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
