package coordinator

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retryring/retryring/coordinator/admin"
)

// TestProfilesNeedTheFlagAndAnAdminToken: /debug/pprof/ answers 404 with the flag to set when
// profiling is off; with --profiling and an admin token file, a GET without the token is refused
// (401) and one with it gets the profile.
func TestProfilesNeedTheFlagAndAnAdminToken(t *testing.T) {
	get := func(n *Node, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+n.HTTPAddr()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	off := newCluster(t, 1, nil).leader()
	if code, body := get(off, admin.PathProfiles+"goroutine?debug=1", ""); code != http.StatusNotFound || !strings.Contains(body, "start it with --profiling") {
		t.Errorf("profiling off: %d %s", code, body)
	}

	dir := authDir(t)
	writeStandardAuth(t, dir)
	on := authCluster(t, dir, func(c *Config) { c.Profiling = true }).leader()
	if code, body := get(on, admin.PathProfiles+"goroutine?debug=1", ""); code != http.StatusUnauthorized || !strings.Contains(body, "needs an admin token") {
		t.Errorf("a profile without the admin token: %d %s", code, body)
	}
	if code, body := get(on, admin.PathProfiles+"goroutine?debug=1", tokOther); code != http.StatusUnauthorized {
		t.Errorf("a profile with a wrong token: %d %s", code, body)
	}
	code, body := get(on, admin.PathProfiles+"goroutine?debug=1", tokAdmin)
	if code != http.StatusOK || !strings.Contains(body, "goroutine profile:") || !strings.Contains(body, "coordinator.(*Node)") {
		t.Errorf("a goroutine profile with the admin token: %d %.300s", code, body)
	}
	if code, body := get(on, admin.PathProfiles, tokAdmin); code != http.StatusOK || !strings.Contains(body, "heap") {
		t.Errorf("the index: %d %.300s", code, body)
	}
}
