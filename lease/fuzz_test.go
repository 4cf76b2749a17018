package lease_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/retryring/retryring/lease"
)

// FuzzDecodeRanges feeds one wire range (and a fixed second one, so that merging is exercised) to
// DecodeRanges and compares it with math/big's reading of the same decimal text: DecodeRanges must
// accept exactly the bounds that are int64 decimals with start <= end, refuse the rest with
// ErrBadRequest, and return the normalized set of the tokens named, which survives a re-encode.
// `go test` runs the seeds; `go test -fuzz=FuzzDecodeRanges ./lease/` searches further.
func FuzzDecodeRanges(f *testing.F) {
	for _, seed := range [][2]string{
		{"-9223372036854775808", "9223372036854775807"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"9223372036854775807", "9223372036854775807"},
		{"0", "0"}, {"-1", "0"}, {"10", "19"}, {"21", "30"}, {"5", "4"},
		{"9223372036854775808", "0"}, {"", ""}, {"abc", "1"}, {"+7", "007"}, {"1e3", "2"}, {" 1", "2"},
	} {
		f.Add(seed[0], seed[1])
	}
	const fixed = 20
	f.Fuzz(func(t *testing.T, start, end string) {
		in := []lease.WireRange{{Start: start, End: end}, {Start: "20", End: "20"}}
		rs, err := lease.DecodeRanges(in)
		s, sOK := decimalToken(start)
		e, eOK := decimalToken(end)
		if wantOK := sOK && eOK && s <= e; (err == nil) != wantOK {
			t.Fatalf("DecodeRanges(%q, %q) = %v, %v; the model says accept=%v", start, end, rs, err, wantOK)
		}
		if err != nil {
			if !errors.Is(err, lease.ErrBadRequest) {
				t.Fatalf("DecodeRanges(%q, %q) refused with %v, want ErrBadRequest", start, end, err)
			}
			return
		}
		want := lease.Normalize([]lease.Range{{Start: s, End: e}, {Start: fixed, End: fixed}})
		if !slices.Equal(rs, want) {
			t.Fatalf("DecodeRanges(%q, %q) = %v, want %v", start, end, rs, want)
		}
		again, err := lease.DecodeRanges(lease.EncodeRanges(rs))
		if err != nil || !again.Equal(rs) {
			t.Fatalf("re-encoding %v gives %v, %v", rs, again, err)
		}
	})
}

// decimalToken is the model's reading of a wire token: a base-10 integer, optionally signed, that
// fits in an int64.
func decimalToken(s string) (int64, bool) {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

// FuzzFromWire: any bytes from the network give an error that errors.Is matches to exactly one
// sentinel of the catalog (ErrInternal when the bytes are not a WireError), without panicking,
// and an error that maps back to the same wire code.
func FuzzFromWire(f *testing.F) {
	for _, code := range []string{
		lease.CodeNotLeader, lease.CodeNoLeader, lease.CodeBadRequest, lease.CodeUnknownRoute,
		lease.CodeBadSetup, lease.CodeDuplicate, lease.CodeUnavailable, lease.CodeUnknownWorker,
		lease.CodeUnauthorized, lease.CodeInternal, "made_up",
	} {
		data, _ := json.Marshal(lease.WireError{Code: code, Message: "m"})
		f.Add(data)
	}
	f.Add([]byte(`{"error":"not_leader","leader_id":"c2","leader_rsocket_addr":"127.0.0.1:7001"}`))
	f.Add([]byte(`{"error":"no_leader","coordinators":[{"id":"c1","rsocket_addr":"127.0.0.1:7001"},{"id":"c2","rsocket_addr":"[::1]:7002"}]}`))
	for _, g := range garbage {
		if len(g) < 1000 {
			f.Add([]byte(g))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := lease.FromWire(data)
		if err == nil {
			t.Fatalf("FromWire(%q) = nil", data)
		}
		matched := 0
		var which error
		for _, s := range codeSentinels {
			if errors.Is(err, s) {
				matched++
				which = s
			}
		}
		if matched != 1 {
			t.Fatalf("FromWire(%q) = %v matches %d sentinels, want exactly one", data, err, matched)
		}
		if we := (*lease.WireError)(nil); errors.As(err, &we) && we.Code == "" {
			t.Fatalf("FromWire(%q) = %#v: a WireError without a code", data, we)
		}
		if err.Error() == "" {
			t.Fatalf("FromWire(%q) gave an error without a message", data)
		}
		we := lease.ToWire(err)
		back, known := codeSentinels[we.Code]
		if !known {
			back = lease.ErrInternal // an unknown code reads as internal on the way back too
		}
		if !errors.Is(back, which) {
			t.Fatalf("FromWire(%q) = %v maps back to code %q", data, err, we.Code)
		}
	})
}

// FuzzWireLease decodes any bytes as a lease element, as a client does (JSON, then
// WireLease.Decode): a refusal is ErrBadRequest; an accepted element is a lease a guard can use
// as it is (a TTL above 0 that did not wrap around, a renewal within it, a node index within the
// count, normalized ranges, no negative or NaN rate) that survives a re-encode unchanged.
func FuzzWireLease(f *testing.F) {
	rate := 12.5
	for _, l := range []lease.Lease{
		{WorkerID: "retry-7", Ring: lease.RingKey{Region: "eu-west", Cluster: "c1", Service: "orders"}, NodeIndex: 0, NodeCount: 2,
			Epoch: 12, Generation: 5, Ranges: lease.Ranges{lease.Split(2)[0]}, TTL: 10 * time.Second, Renewal: 2 * time.Second},
		{WorkerID: "w", Ring: lease.RingKey{Region: "r", Cluster: "c", Service: "s"}, NodeIndex: 2, NodeCount: 3, Epoch: 1,
			Ranges: lease.Ranges{lease.FullRing}, TTL: time.Millisecond, Controls: &lease.Controls{PausedImpl: []string{"payment"}, RatePerS: &rate}},
		{WorkerID: "w", NodeCount: 1, Epoch: 1 << 53, TTL: 1500 * time.Millisecond, Renewal: 1500 * time.Millisecond, Controls: &lease.Controls{Paused: true}},
	} {
		data, _ := json.Marshal(lease.Encode(l, time.UnixMilli(1732950000123)))
		f.Add(data)
	}
	for _, s := range []string{
		`{"ttl_ms":0}`, `{"ttl_ms":10000,"renewal_ms":10001}`, `{"ttl_ms":9223372036854775807}`, `{"ttl_ms":9223372036854}`,
		`{"ttl_ms":10,"node_index":1,"node_count":1}`, `{"ttl_ms":10,"node_index":-1}`, `{"ttl_ms":10,"controls":{"rate_per_s":-1}}`,
		`{"ttl_ms":10,"ranges":[{"start":"5","end":"4"}]}`, `{"ttl_ms":10,"ranges":[{"start":5,"end":6}]}`, `{"ttl_ms":10.5}`,
		`{"ttl_ms":10,"ranges":[{"start":"9223372036854775807","end":"9223372036854775807"},{"start":"-9223372036854775808","end":"0"},{"start":"-5","end":"7"}]}`,
		`{"ttl_ms":10,"controls":null,"ranges":null}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	demand := time.Unix(1000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		var w lease.WireLease
		if json.Unmarshal(data, &w) != nil {
			return
		}
		l, err := w.Decode(demand)
		if err != nil {
			if !errors.Is(err, lease.ErrBadRequest) {
				t.Fatalf("Decode(%s) refused with %v, want ErrBadRequest", data, err)
			}
			return
		}
		switch {
		case l.TTL <= 0 || l.TTL.Milliseconds() != w.TTLMs:
			t.Fatalf("Decode(%s): TTL %v from ttl_ms %d", data, l.TTL, w.TTLMs)
		case l.Renewal < 0 || l.Renewal > l.TTL:
			t.Fatalf("Decode(%s): renewal %v outside [0, %v]", data, l.Renewal, l.TTL)
		case l.NodeIndex < 0 || l.NodeCount < 0 || l.NodeCount > 0 && l.NodeIndex >= l.NodeCount:
			t.Fatalf("Decode(%s): node %d of %d", data, l.NodeIndex, l.NodeCount)
		case !l.ExpiresAt().After(demand) || !l.ValidFrom.Equal(demand):
			t.Fatalf("Decode(%s): valid from %v until %v, demand sent at %v", data, l.ValidFrom, l.ExpiresAt(), demand)
		case !lease.Normalize(l.Ranges).Equal(l.Ranges):
			t.Fatalf("Decode(%s): ranges %v are not normalized", data, l.Ranges)
		case l.Controls != nil && l.Controls.RatePerS != nil && !(*l.Controls.RatePerS >= 0):
			t.Fatalf("Decode(%s): rate %v", data, *l.Controls.RatePerS)
		}
		enc, err := json.Marshal(lease.Encode(l, time.UnixMilli(w.IssuedAtMs)))
		if err != nil {
			t.Fatalf("Decode(%s) = %+v, which does not encode: %v", data, l, err)
		}
		var w2 lease.WireLease
		if err := json.Unmarshal(enc, &w2); err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", enc, err)
		}
		l2, err := w2.Decode(demand)
		if err != nil || !reflect.DeepEqual(l, l2) {
			t.Fatalf("Decode(%s) = %+v; re-encoded as %s it reads %+v, %v", data, l, enc, l2, err)
		}
	})
}
