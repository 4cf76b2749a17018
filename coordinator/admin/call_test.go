package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retryring/retryring/lease"
)

// TestWriteErrorMapsEachSentinel: each error an admin call can end with is answered with its
// status and code, the message without the code it starts with, byte for byte.
func TestWriteErrorMapsEachSentinel(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		body   string
	}{
		{fmt.Errorf("%w: per_second must be above 0", lease.ErrBadRequest), 400, `{"error":"bad_request","message":"per_second must be above 0"}`},
		{fmt.Errorf("%w: c3 registered version 1", ErrUpgradeIncomplete), 409, `{"error":"upgrade_incomplete","message":"c3 registered version 1"}`},
		{fmt.Errorf("%w: node id c2 is a voter already", ErrPeerConflict), 409, `{"error":"peer_conflict","message":"node id c2 is a voter already"}`},
		{fmt.Errorf("%w: no worker \"w\" in any ring", lease.ErrUnknownWorker), 404, `{"error":"unknown_worker","message":"no worker \"w\" in any ring"}`},
		{fmt.Errorf("%w: no leader known", lease.ErrNoLeader), 503, `{"error":"no_leader","message":"no leader known"}`},
		{fmt.Errorf("%w: leader c1 did not answer", lease.ErrUnavailable), 503, `{"error":"unavailable","message":"leader c1 did not answer"}`},
		{errors.New("something else"), 500, `{"error":"internal","message":"something else"}`},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, tc.err)
		if rec.Code != tc.status || rec.Body.String() != tc.body+"\n" || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%v: %d %q, want %d %q", tc.err, rec.Code, rec.Body.String(), tc.status, tc.body)
		}
	}
}

// TestReadBodyAndDecodeStrictRefuseWithReasons: a body over MaxBody is answered 400 without
// being decoded; a strict decode refuses garbage, unknown fields and data after the object, and
// takes an empty body for {}.
func TestReadBodyAndDecodeStrictRefuseWithReasons(t *testing.T) {
	rec := httptest.NewRecorder()
	if _, ok := ReadBody(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat(" ", MaxBody+1)))); ok ||
		rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "the body is larger than 65536 bytes") {
		t.Errorf("a body over MaxBody: ok %v, %d %q", ok, rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	if body, ok := ReadBody(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"to":"c2"}`))); !ok || string(body) != `{"to":"c2"}` {
		t.Errorf("a small body: ok %v, %q", ok, body)
	}
	for body, want := range map[string]string{
		`{"to":`:         "bad_request: body: unexpected EOF",
		`{"from":"c1"}`:  `bad_request: body: json: unknown field "from"`,
		`{"to":"c2"} {}`: "bad_request: body: data after the JSON object",
		"  \n":           "",
		`{"to":"c2"}`:    "",
	} {
		var req StepDownRequest
		err := DecodeStrict([]byte(body), &req)
		if (err == nil) != (want == "") || (err != nil && (err.Error() != want || !errors.Is(err, lease.ErrBadRequest))) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// TestForwardedNoLeader: only a 503 whose code is no_leader says the node taken for the leader
// does not lead.
func TestForwardedNoLeader(t *testing.T) {
	for _, tc := range []struct {
		a    Forwarded
		want bool
	}{
		{Forwarded{Status: 503, Body: []byte(`{"error":"no_leader","message":"c2 forwarded this call"}`)}, true},
		{Forwarded{Status: 503, Body: []byte(`{"error":"unavailable","message":"no quorum"}`)}, false},
		{Forwarded{Status: 200, Body: []byte(`{"error":"no_leader"}`)}, false},
		{Forwarded{Status: 503, Body: []byte(`not json`)}, false},
	} {
		if got := tc.a.NoLeader(); got != tc.want {
			t.Errorf("%d %s: NoLeader %v, want %v", tc.a.Status, tc.a.Body, got, tc.want)
		}
	}
}
