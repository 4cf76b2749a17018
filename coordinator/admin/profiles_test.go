package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// tokenGate admits the header "Bearer good" and counts what it refuses.
type tokenGate struct{ refused int }

func (g *tokenGate) RefuseAdmin(authorization string) (string, bool) {
	if authorization == "Bearer good" {
		return "", false
	}
	g.refused++
	return "this call needs an admin token", true
}

// TestProfilesAnswerOnlyWhenOnAndAdmitted: off, every profile path is a 404 that names the flag;
// on, a caller the gate refuses gets a 401 with the bearer challenge and the gate's reason, and an
// admitted one the profile.
func TestProfilesAnswerOnlyWhenOnAndAdmitted(t *testing.T) {
	get := func(s *Server, path, authorization string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	off := New(&fakeNode{view: RingView{CoordinatorID: "c1"}}, zerolog.Nop())
	off.ServeProfiles(false, &tokenGate{})
	rec := get(off, PathProfiles+"heap", "Bearer good")
	if want := `{"error":"not_found","message":"/debug/pprof/heap: profiling is off on this coordinator (start it with --profiling)"}`; rec.Code != http.StatusNotFound || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("profiling off: %d %s, want 404 %s", rec.Code, rec.Body, want)
	}

	gate := &tokenGate{}
	on := New(&fakeNode{view: RingView{CoordinatorID: "c1"}}, zerolog.Nop())
	on.ServeProfiles(true, gate)
	rec = get(on, PathProfiles+"goroutine?debug=1", "Bearer bad")
	if want := `{"error":"unauthorized","message":"profiles: this call needs an admin token"}`; rec.Code != http.StatusUnauthorized ||
		strings.TrimSpace(rec.Body.String()) != want || rec.Header().Get("WWW-Authenticate") != `Bearer realm="retryring"` || gate.refused != 1 {
		t.Errorf("a refused caller: %d %s (challenge %q, refused %d), want 401 %s", rec.Code, rec.Body, rec.Header().Get("WWW-Authenticate"), gate.refused, want)
	}
	if rec = get(on, PathProfiles+"goroutine?debug=1", "Bearer good"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine profile:") {
		t.Errorf("a goroutine profile: %d %.200s", rec.Code, rec.Body)
	}
	if rec = get(on, PathProfiles, "Bearer good"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "heap") {
		t.Errorf("the index: %d %.200s", rec.Code, rec.Body)
	}
}
