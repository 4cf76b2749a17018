package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// fakeNode is a coordinator as the admin API sees it, written by hand.
type fakeNode struct {
	view   RingView
	ready  Readiness
	refuse bool // Authorize answers 401
	asked  int  // calls of Authorize
}

func (f *fakeNode) ID() string                                 { return f.view.CoordinatorID }
func (f *fakeNode) View() RingView                             { return f.view }
func (f *fakeNode) BacklogSamples() map[string][]BacklogSample { return nil }
func (f *fakeNode) Now() time.Time                             { return t0 }
func (f *fakeNode) Readiness() Readiness                       { return f.ready }
func (f *fakeNode) Authorize(w http.ResponseWriter, _ *http.Request) bool {
	f.asked++
	if f.refuse {
		WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
	}
	return !f.refuse
}

func call(s *Server, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// TestServerAnswersInJSON: an unknown path is 404 and a known path with the wrong method 405
// with Allow, both as JSON; HEAD is let through where GET is; a prefix route takes every method.
func TestServerAnswersInJSON(t *testing.T) {
	s := New(&fakeNode{view: RingView{CoordinatorID: "c1"}}, zerolog.Nop())
	var prefixed string
	s.HandlePrefix("/v1/things/", func(w http.ResponseWriter, r *http.Request) { prefixed = r.Method + " " + r.URL.Path })

	if rec := call(s, http.MethodGet, "/nowhere"); rec.Code != http.StatusNotFound ||
		rec.Body.String() != `{"error":"not_found","message":"/nowhere"}`+"\n" || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("unknown path: %d %q", rec.Code, rec.Body.String())
	}
	if rec := call(s, http.MethodPost, PathRing); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodGet ||
		rec.Body.String() != `{"error":"method_not_allowed","message":"POST /v1/ring"}`+"\n" {
		t.Errorf("POST %s: %d allow %q %q", PathRing, rec.Code, rec.Header().Get("Allow"), rec.Body.String())
	}
	if rec := call(s, http.MethodHead, PathHealthz); rec.Code != http.StatusOK {
		t.Errorf("HEAD %s: %d", PathHealthz, rec.Code)
	}
	if rec := call(s, http.MethodGet, PathHealthz); rec.Body.String() != `{"coordinator_id":"c1","ok":true}`+"\n" {
		t.Errorf("GET %s: %q", PathHealthz, rec.Body.String())
	}
	if call(s, http.MethodDelete, "/v1/things/x"); prefixed != "DELETE /v1/things/x" {
		t.Errorf("prefix route got %q", prefixed)
	}
}

// TestServerAsksTheEdgeFirst: a call the node's edge refuses reaches no handler, known path or not.
func TestServerAsksTheEdgeFirst(t *testing.T) {
	n := &fakeNode{refuse: true}
	s := New(n, zerolog.Nop())
	reached := false
	s.Handle("/v1/change", http.MethodPost, func(http.ResponseWriter, *http.Request) { reached = true })
	for _, path := range []string{"/v1/change", "/nowhere"} {
		if rec := call(s, http.MethodPost, path); rec.Code != http.StatusUnauthorized {
			t.Errorf("POST %s: %d; want 401 from the edge", path, rec.Code)
		}
	}
	if reached || n.asked != 2 {
		t.Errorf("handler reached %v, edge asked %d times; want false, 2", reached, n.asked)
	}
}

// TestPageRefusesABadRefresh: ?refresh= takes 0 to 3600 seconds; anything else is a JSON 400
// that says so, and a good one draws the page.
func TestPageRefusesABadRefresh(t *testing.T) {
	s := New(&fakeNode{view: RingView{CoordinatorID: "c1", LeaderID: "c1"}}, zerolog.Nop())
	for _, q := range []string{"-1", "3601", "soon"} {
		rec := call(s, http.MethodGet, "/?refresh="+q)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "refresh must be a number of seconds from 0 to 3600") {
			t.Errorf("refresh=%s: %d %q", q, rec.Code, rec.Body.String())
		}
	}
	rec := call(s, http.MethodGet, "/?refresh=0")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" || rec.Header().Get("Cache-Control") != "no-store" ||
		!strings.Contains(rec.Body.String(), "retryring coordinator c1") || strings.Contains(rec.Body.String(), `http-equiv="refresh"`) {
		t.Errorf("refresh=0: %d %v\n%s", rec.Code, rec.Header(), rec.Body.String())
	}
}

// TestReadyzSaysWhy: GET /readyz is 200 with the readiness when the node is ready, 503 with its
// reason when not.
func TestReadyzSaysWhy(t *testing.T) {
	n := &fakeNode{ready: Readiness{Reason: "applied index 3 behind commit index 5", LeaderID: "c2", AppliedIndex: 3, CommitIndex: 5}}
	s := New(n, zerolog.Nop())
	if rec := call(s, http.MethodGet, PathReadyz); rec.Code != http.StatusServiceUnavailable ||
		rec.Body.String() != `{"ready":false,"reason":"applied index 3 behind commit index 5","leader_id":"c2","applied_index":3,"commit_index":5}`+"\n" {
		t.Errorf("not ready: %d %q", rec.Code, rec.Body.String())
	}
	n.ready = Readiness{Ready: true, LeaderID: "c2", AppliedIndex: 5, CommitIndex: 5}
	if rec := call(s, http.MethodGet, PathReadyz); rec.Code != http.StatusOK ||
		rec.Body.String() != `{"ready":true,"leader_id":"c2","applied_index":5,"commit_index":5}`+"\n" {
		t.Errorf("ready: %d %q", rec.Code, rec.Body.String())
	}
}
