package lease_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/retryring/retryring/lease"
)

var genToken = rapid.OneOf(
	rapid.SampledFrom(endpoints),
	rapid.Int64(),
)

var genLease = rapid.Custom(func(t *rapid.T) lease.Lease {
	var rs []lease.Range
	for range rapid.IntRange(0, 6).Draw(t, "n_ranges") {
		a, b := genToken.Draw(t, "a"), genToken.Draw(t, "b")
		rs = append(rs, lease.Range{Start: min(a, b), End: max(a, b)})
	}
	name := rapid.StringMatching(`[a-z0-9-]{1,12}`)
	count := rapid.IntRange(1, 100).Draw(t, "node_count")
	return lease.Lease{
		WorkerID:   name.Draw(t, "worker_id"),
		Ring:       lease.RingKey{Region: name.Draw(t, "region"), Cluster: name.Draw(t, "cluster"), Service: name.Draw(t, "service")},
		NodeIndex:  rapid.IntRange(0, count-1).Draw(t, "node_index"),
		NodeCount:  count,
		Epoch:      rapid.Uint64().Draw(t, "epoch"),
		Generation: rapid.Uint64().Draw(t, "generation"),
		Ranges:     lease.Normalize(rs),
		TTL:        time.Duration(rapid.Int64Range(1, 3_600_000).Draw(t, "ttl_ms")) * time.Millisecond,
	}
})

func TestLeaseWireRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genLease.Draw(t, "lease")
		issued := time.UnixMilli(rapid.Int64Range(0, 1<<45).Draw(t, "issued_ms"))
		data, err := json.Marshal(lease.Encode(l, issued))
		if err != nil {
			t.Fatal(err)
		}
		var w lease.WireLease
		if err := json.Unmarshal(data, &w); err != nil {
			t.Fatalf("unmarshal %s: %v", data, err)
		}
		if w.IssuedAtMs != issued.UnixMilli() {
			t.Fatalf("issued_at_ms %d, want %d", w.IssuedAtMs, issued.UnixMilli())
		}
		sent := time.Unix(1_700_000_000, 5) // the worker's time of the demand
		got, err := w.Decode(sent)
		if err != nil {
			t.Fatalf("Decode(%s): %v", data, err)
		}
		want := l
		want.ValidFrom = sent
		if !got.Ranges.Equal(want.Ranges) {
			t.Fatalf("ranges %v came back as %v via %s", want.Ranges, got.Ranges, data)
		}
		got.Ranges, want.Ranges = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed the lease:\n sent %+v\n  got %+v\n via %s", want, got, data)
		}
	})
}

// The JSON shape of product.md, field by field: any client in any language depends on it.
func TestWireLeaseJSONShape(t *testing.T) {
	l := lease.Lease{
		WorkerID: "w-1", Ring: lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"},
		NodeIndex: 0, NodeCount: 2, Epoch: 9, Generation: 4,
		Ranges: lease.Split(2), TTL: 3 * time.Second, Renewal: time.Second,
	}
	data, err := json.Marshal(lease.Encode(l, time.UnixMilli(1_700_000_000_123)))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"worker_id":"w-1","ring":{"region":"eu","cluster":"c1","service":"orders"},` +
		`"node_index":0,"node_count":2,"epoch":9,"generation":4,` +
		`"ranges":[{"start":"-9223372036854775808","end":"-1"},{"start":"0","end":"9223372036854775807"}],` +
		`"ttl_ms":3000,"renewal_ms":1000,"issued_at_ms":1700000000123}`
	if string(data) != want {
		t.Fatalf("wire lease\n got %s\nwant %s", data, want)
	}
	// To a client that announced "controls", every element carries them; rate_per_s null is no limit.
	rate := 2.5
	l.Controls = &lease.Controls{PausedImpl: []string{"Ship"}, RatePerS: &rate}
	data, err = json.Marshal(lease.Encode(l, time.UnixMilli(1_700_000_000_123)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"controls":{"paused":false,"paused_impl":["Ship"],"rate_per_s":2.5}`) {
		t.Fatalf("wire lease with controls: %s", data)
	}
	// An empty lease still sends "ranges":[] rather than null.
	empty, _ := json.Marshal(lease.Encode(lease.Lease{TTL: time.Second}, time.UnixMilli(0)))
	if !strings.Contains(string(empty), `"ranges":[]`) {
		t.Fatalf("empty lease encodes as %s", empty)
	}
}

func TestDecodeRefusesBadLeases(t *testing.T) {
	good := lease.Encode(lease.Lease{Ranges: lease.Ranges{lease.FullRing}, TTL: time.Second}, time.UnixMilli(0))
	for _, ttl := range []int64{0, -1, math.MinInt64, math.MaxInt64/int64(time.Millisecond) + 1, math.MaxInt64} {
		w := good
		w.TTLMs = ttl
		if _, err := w.Decode(time.Now()); !errors.Is(err, lease.ErrBadRequest) {
			t.Errorf("ttl_ms %d: got %v, want ErrBadRequest", ttl, err)
		}
	}
	w := good
	w.TTLMs = math.MaxInt64 / int64(time.Millisecond)
	if l, err := w.Decode(time.Now()); err != nil || l.TTL <= 0 {
		t.Errorf("largest ttl_ms: %v, %v", l.TTL, err)
	}
	w = good
	w.Ranges = []lease.WireRange{{Start: "5", End: "4"}}
	if _, err := w.Decode(time.Now()); !errors.Is(err, lease.ErrBadRequest) {
		t.Errorf("start > end: got %v", err)
	}
}

func TestDecodeRanges(t *testing.T) {
	wr := func(s, e string) lease.WireRange { return lease.WireRange{Start: s, End: e} }
	got, err := lease.DecodeRanges([]lease.WireRange{
		wr("9223372036854775807", "9223372036854775807"),
		wr("-9223372036854775808", "-9223372036854775808"),
		wr("0", "10"), wr("11", "20"), wr("5", "7"),
	})
	want := lease.Ranges{{Start: lease.MinToken, End: lease.MinToken}, {Start: 0, End: 20}, {Start: lease.MaxToken, End: lease.MaxToken}}
	if err != nil || !got.Equal(want) {
		t.Fatalf("DecodeRanges = %v, %v; want %v normalized", got, err, want)
	}
	if got, err := lease.DecodeRanges(nil); err != nil || !got.Empty() {
		t.Fatalf("DecodeRanges(nil) = %v, %v", got, err)
	}
	bad := []string{"", " ", "abc", "1.5", "1e3", "0x10", " 1", "1 ", "--1", "9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "١", "1_000"}
	for _, b := range bad {
		for _, w := range []lease.WireRange{wr(b, "0"), wr("0", b)} {
			if _, err := lease.DecodeRanges([]lease.WireRange{wr("1", "2"), w}); !errors.Is(err, lease.ErrBadRequest) {
				t.Errorf("DecodeRanges(%+v): got %v, want ErrBadRequest", w, err)
			}
		}
	}
	for _, w := range []lease.WireRange{wr("1", "0"), wr("9223372036854775807", "-9223372036854775808"), wr("0", "-1")} {
		if _, err := lease.DecodeRanges([]lease.WireRange{w}); !errors.Is(err, lease.ErrBadRequest) {
			t.Errorf("DecodeRanges(%+v) with start > end: got %v, want ErrBadRequest", w, err)
		}
	}
}

func TestEncodeRangesUsesDecimalStrings(t *testing.T) {
	got := lease.EncodeRanges(lease.Ranges{lease.FullRing, {Start: -1, End: 0}})
	want := []lease.WireRange{{Start: "-9223372036854775808", End: "9223372036854775807"}, {Start: "-1", End: "0"}}
	if !slices.Equal(got, want) {
		t.Fatalf("EncodeRanges = %v, want %v", got, want)
	}
}

var codeSentinels = map[string]error{
	lease.CodeNotLeader: lease.ErrNotLeader, lease.CodeNoLeader: lease.ErrNoLeader,
	lease.CodeBadRequest: lease.ErrBadRequest, lease.CodeUnknownRoute: lease.ErrUnknownRoute,
	lease.CodeBadSetup: lease.ErrBadSetup, lease.CodeDuplicate: lease.ErrDuplicate,
	lease.CodeUnavailable: lease.ErrUnavailable, lease.CodeUnknownWorker: lease.ErrUnknownWorker,
	lease.CodeUnauthorized: lease.ErrUnauthorized, lease.CodeInternal: lease.ErrInternal,
}

// onlySentinel fails unless err matches want and no other sentinel of the codeSentinels.
func onlySentinel(t *testing.T, what string, err, want error) {
	t.Helper()
	for code, s := range codeSentinels {
		if errors.Is(err, s) != errors.Is(want, s) {
			t.Errorf("%s: errors.Is(%v, %s) = %v", what, err, code, errors.Is(err, s))
		}
	}
}

func TestWireErrorsMapBothWays(t *testing.T) {
	for _, code := range slices.Sorted(maps.Keys(codeSentinels)) {
		sentinel := codeSentinels[code]
		if sentinel.Error() != code {
			t.Errorf("sentinel for %s reads %q", code, sentinel.Error())
		}
		we := lease.ToWire(fmt.Errorf("registering worker w1: %w", sentinel))
		if we.Code != code || !strings.Contains(we.Message, "registering worker w1") {
			t.Errorf("ToWire(%v) = %+v", sentinel, we)
		}
		data, err := json.Marshal(we)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), `{"error":"`+code+`"`) {
			t.Errorf("%s encodes as %s", code, data)
		}
		back := lease.FromWire(data)
		onlySentinel(t, "FromWire("+string(data)+")", back, sentinel)
		var got *lease.WireError
		if !errors.As(back, &got) || got.Code != code {
			t.Errorf("FromWire(%s) = %#v, want a *WireError with code %s", data, back, code)
		}
	}
}

func TestNotLeaderCarriesTheLeader(t *testing.T) {
	sent := &lease.WireError{Code: lease.CodeNotLeader, LeaderID: "c2", LeaderRSocketAddr: "10.0.0.2:7000"}
	we := lease.ToWire(fmt.Errorf("ring.leases: %w", sent))
	if !reflect.DeepEqual(we, *sent) {
		t.Fatalf("ToWire dropped the leader: %+v", we)
	}
	data, _ := json.Marshal(we)
	const want = `{"error":"not_leader","leader_id":"c2","leader_rsocket_addr":"10.0.0.2:7000"}`
	if string(data) != want {
		t.Fatalf("not_leader encodes as %s, want %s", data, want)
	}
	err := lease.FromWire(data)
	onlySentinel(t, "not_leader", err, lease.ErrNotLeader)
	var got *lease.WireError
	if !errors.As(err, &got) || got.LeaderID != "c2" || got.LeaderRSocketAddr != "10.0.0.2:7000" {
		t.Fatalf("FromWire lost the leader: %#v", err)
	}
	if !strings.Contains(err.Error(), "c2") {
		t.Fatalf("message %q does not name the leader", err.Error())
	}
}

// TestNoLeaderCarriesTheCoordinators: the coordinators list goes out and comes back whole, in the
// JSON shape protocol.md section 8 documents.
func TestNoLeaderCarriesTheCoordinators(t *testing.T) {
	sent := &lease.WireError{Code: lease.CodeNoLeader, Message: "no live leader known", Coordinators: []lease.WireCoordinator{
		{ID: "c1", RSocketAddr: "10.0.0.1:7878"}, {ID: "c2", RSocketAddr: "[fd00::2]:7878"},
	}}
	data, err := json.Marshal(lease.ToWire(fmt.Errorf("ring.leases: %w", sent)))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"error":"no_leader","message":"no live leader known","coordinators":[{"id":"c1","rsocket_addr":"10.0.0.1:7878"},{"id":"c2","rsocket_addr":"[fd00::2]:7878"}]}`
	if string(data) != want {
		t.Fatalf("no_leader encodes as %s, want %s", data, want)
	}
	back := lease.FromWire(data)
	onlySentinel(t, "no_leader", back, lease.ErrNoLeader)
	var got *lease.WireError
	if !errors.As(back, &got) || !reflect.DeepEqual(got, sent) {
		t.Fatalf("FromWire(%s) = %#v, want %#v", data, back, sent)
	}
	// Fields a newer coordinator may add are ignored, in the body and in an entry.
	back = lease.FromWire([]byte(`{"error":"not_leader","leader_id":"c2","leader_rsocket_addr":"h:1","later":1,"coordinators":[{"id":"c2","rsocket_addr":"h:1","http_addr":"h:2"}]}`))
	if !errors.As(back, &got) || got.Code != lease.CodeNotLeader || len(got.Coordinators) != 1 || got.Coordinators[0] != (lease.WireCoordinator{ID: "c2", RSocketAddr: "h:1"}) {
		t.Fatalf("unknown fields broke the decoding: %#v", back)
	}
}

// TestFromWireKeepsOnlyWellFormedCoordinators: a client dials what a coordinators list names, so
// it keeps only entries with an id and a host:port address within their bounds, the first 16; a
// list of any other shape names nothing, and never costs the body its code. An oversized body is
// not an error body at all.
func TestFromWireKeepsOnlyWellFormedCoordinators(t *testing.T) {
	entry := func(id, addr string) string { return `{"id":"` + id + `","rsocket_addr":"` + addr + `"}` }
	good := entry("c1", "127.0.0.1:7878")
	var many []string
	for i := range lease.MaxWireCoordinators + 4 {
		many = append(many, entry(fmt.Sprint("n", i), fmt.Sprintf("10.0.0.%d:7878", i)))
	}
	for _, tc := range []struct {
		name, list string
		want       int // entries kept
	}{
		{"one good", "[" + good + "]", 1},
		{"too many: the first 16", "[" + strings.Join(many, ",") + "]", lease.MaxWireCoordinators},
		{"no id", `[{"rsocket_addr":"127.0.0.1:7878"},` + good + `]`, 1},
		{"long id", "[" + entry(strings.Repeat("c", 129), "127.0.0.1:7878") + "," + good + "]", 1},
		{"no address", `[{"id":"c1"},` + good + `]`, 1},
		{"no port", "[" + entry("c1", "127.0.0.1") + "," + entry("c2", "127.0.0.1:") + "," + good + "]", 1},
		{"long address", "[" + entry("c1", strings.Repeat("h", 300)+":1") + "," + good + "]", 1},
		{"a number id", `[{"id":1,"rsocket_addr":"127.0.0.1:7878"},` + good + `]`, 1},
		{"not objects", `["127.0.0.1:7878",2,null,` + good + `]`, 1},
		{"not an array", good, 0},
		{"a string", `"c1"`, 0},
		{"null", "null", 0},
	} {
		err := lease.FromWire([]byte(`{"error":"no_leader","message":"m","coordinators":` + tc.list + `}`))
		onlySentinel(t, tc.name, err, lease.ErrNoLeader)
		var we *lease.WireError
		if !errors.As(err, &we) || we.Code != lease.CodeNoLeader || we.Message != "m" {
			t.Errorf("%s: FromWire = %#v, want no_leader with its message", tc.name, err)
			continue
		}
		if len(we.Coordinators) != tc.want {
			t.Errorf("%s: kept %+v, want %d entries", tc.name, we.Coordinators, tc.want)
		}
		for _, c := range we.Coordinators {
			if c.Validate() != nil {
				t.Errorf("%s: kept a bad entry %+v", tc.name, c)
			}
		}
	}
	oversized := `{"error":"no_leader","message":"` + strings.Repeat("m", lease.MaxWireErrorBytes) + `"}`
	err := lease.FromWire([]byte(oversized))
	onlySentinel(t, "oversized body", err, lease.ErrInternal)
	if len(err.Error()) > 400 {
		t.Errorf("oversized body: message of %d bytes", len(err.Error()))
	}
}

func TestToWireUnknownErrorsAreInternal(t *testing.T) {
	for _, err := range []error{errors.New("boom"), fmt.Errorf("wrapped: %w", errors.New("boom")), lease.ErrLeaseExpired} {
		if we := lease.ToWire(err); we.Code != lease.CodeInternal || we.Message != err.Error() {
			t.Errorf("ToWire(%v) = %+v, want internal", err, we)
		}
	}
}

func TestToWireIsDeterministic(t *testing.T) {
	err := errors.Join(lease.ErrUnavailable, lease.ErrUnauthorized, lease.ErrNotLeader)
	first := lease.ToWire(err).Code
	for range 200 {
		if got := lease.ToWire(err).Code; got != first {
			t.Fatalf("ToWire of one error gave %s and %s", first, got)
		}
	}
	if first != lease.CodeNotLeader {
		t.Fatalf("ToWire picked %s, want the first code of the codeSentinels, not_leader", first)
	}
}

func TestFromWireUnknownCodeIsInternalButKeepsTheCode(t *testing.T) {
	err := lease.FromWire([]byte(`{"error":"quota_exceeded","message":"slow down"}`))
	onlySentinel(t, "unknown code", err, lease.ErrInternal)
	var we *lease.WireError
	if !errors.As(err, &we) || we.Code != "quota_exceeded" || we.Message != "slow down" {
		t.Fatalf("FromWire lost the unknown code: %#v", err)
	}
}

var garbage = []string{
	"", " ", "null", "{}", "[]", `""`, "0", "true", `{"error":""}`, `{"error":5}`, `{"error":null}`,
	`{"error":["not_leader"]}`, `{"error":"not_leader"`, `{"error":"not_leader"} trailing`,
	"\x00\xff\xfe", "not json at all", `{"message":"no code"}`, strings.Repeat("[", 10_000),
	strings.Repeat("x", 100_000),
}

func TestFromWireGarbageIsInternal(t *testing.T) {
	for _, g := range garbage {
		err := lease.FromWire([]byte(g))
		onlySentinel(t, fmt.Sprintf("FromWire(%.40q)", g), err, lease.ErrInternal)
		if we := (*lease.WireError)(nil); errors.As(err, &we) {
			t.Errorf("FromWire(%.40q) = %#v: garbage must not pass for a WireError", g, we)
		}
		if len(err.Error()) > 400 {
			t.Errorf("FromWire(%.40q): message of %d bytes; the payload should be truncated", g, len(err.Error()))
		}
	}
}

func TestSetupValidate(t *testing.T) {
	good := lease.Setup{WorkerID: "w1", Incarnation: "3f2a", Region: "eu", Cluster: "c1", Service: "orders"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good setup refused: %v", err)
	}
	withToken := good
	withToken.Token = "secret"
	if err := withToken.Validate(); err != nil {
		t.Fatalf("setup with token refused: %v", err)
	}
	if r := good.Ring(); r != (lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}) || r.String() != "eu/c1/orders" {
		t.Fatalf("Ring() = %+v", r)
	}
	longest := good
	longest.WorkerID, longest.Incarnation = strings.Repeat("w", 256), strings.Repeat("i", 256)
	if err := longest.Validate(); err != nil {
		t.Fatalf("256-byte ids refused: %v", err)
	}
	bad := map[string]func(*lease.Setup){
		"no worker_id":        func(s *lease.Setup) { s.WorkerID = "" },
		"no incarnation":      func(s *lease.Setup) { s.Incarnation = "" },
		"long worker_id":      func(s *lease.Setup) { s.WorkerID = strings.Repeat("w", 257) },
		"long incarnation":    func(s *lease.Setup) { s.Incarnation = strings.Repeat("i", 257) },
		"no region":           func(s *lease.Setup) { s.Region = "" },
		"no cluster":          func(s *lease.Setup) { s.Cluster = "" },
		"no service":          func(s *lease.Setup) { s.Service = "" },
		"nothing at all":      func(s *lease.Setup) { *s = lease.Setup{} },
		"ring but no workers": func(s *lease.Setup) { s.WorkerID, s.Incarnation = "", "" },
	}
	for name, spoil := range bad {
		s := good
		spoil(&s)
		if err := s.Validate(); !errors.Is(err, lease.ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
		}
	}
	var decoded lease.Setup
	if err := json.Unmarshal([]byte(`{"worker_id":"w1","incarnation":"3f2a","region":"eu","cluster":"c1","service":"orders"}`), &decoded); err != nil || !reflect.DeepEqual(decoded, good) {
		t.Fatalf("SETUP JSON decodes as %+v, %v", decoded, err)
	}
}

func TestReportValidate(t *testing.T) {
	good := lease.Report{
		WorkerID:   "w1",
		Executions: map[string]uint64{"done": 7, "transient": 1, "permanent": 0, "not_sent": 0},
		Breakers: []lease.BreakerReport{
			{Impl: "Payment", State: lease.BreakerOpen, OpenUntilMs: 1_700_000_000_000},
			{Impl: "", State: lease.BreakerHalfOpen},
		},
		OldestWindowStartMs: 1_700_000_000_000, PendingRows: 12, DirectoryOldestWindowStartMs: 1_699_999_000_000,
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good report refused: %v", err)
	}
	full := good
	full.Breakers = make([]lease.BreakerReport, lease.MaxReportBreakers)
	for i := range full.Breakers {
		full.Breakers[i] = lease.BreakerReport{Impl: strings.Repeat("i", lease.MaxRingNameBytes), State: lease.BreakerOpen}
	}
	if err := full.Validate(); err != nil {
		t.Fatalf("a report at every limit refused: %v", err)
	}
	bad := map[string]func(*lease.Report){
		"too many breakers": func(r *lease.Report) {
			r.Breakers = make([]lease.BreakerReport, lease.MaxReportBreakers+1)
			for i := range r.Breakers {
				r.Breakers[i].State = lease.BreakerOpen
			}
		},
		"too many outcomes": func(r *lease.Report) {
			r.Executions = map[string]uint64{}
			for i := range 9 {
				r.Executions[fmt.Sprint("o", i)] = 1
			}
		},
		"long outcome":       func(r *lease.Report) { r.Executions = map[string]uint64{strings.Repeat("o", 65): 1} },
		"empty outcome":      func(r *lease.Report) { r.Executions = map[string]uint64{"": 1} },
		"long impl":          func(r *lease.Report) { r.Breakers[0].Impl = strings.Repeat("i", lease.MaxRingNameBytes+1) },
		"closed breaker":     func(r *lease.Report) { r.Breakers[0].State = "closed" },
		"long lease_fit":     func(r *lease.Report) { r.LeaseFit = strings.Repeat("x", 513) },
		"negative pending":   func(r *lease.Report) { r.PendingRows = -1 },
		"negative oldest":    func(r *lease.Report) { r.OldestWindowStartMs = -1 },
		"negative directory": func(r *lease.Report) { r.DirectoryOldestWindowStartMs = -1 },
	}
	for name, spoil := range bad {
		r := good
		r.Breakers = slices.Clone(good.Breakers)
		spoil(&r)
		if err := r.Validate(); !errors.Is(err, lease.ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
		}
	}
}
