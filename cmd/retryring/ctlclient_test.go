package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every ctl call carries the token of --token-file as a bearer token; a 401 says to give one, or
// that the one given was refused. Over https the coordinator is verified against --ca.
func TestCtlSendsTheBearerTokenOverTLS(t *testing.T) {
	const token = "s3cret-admin-token"
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized","message":"a bearer token is required"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ring":{"region":"eu","cluster":"c1","service":"orders"},"worker_id":"w1","cordoned":true,"leader_id":"c1"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile, wrongFile := filepath.Join(dir, "token"), filepath.Join(dir, "wrong")
	_ = os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	_ = os.WriteFile(wrongFile, []byte("nope\n"), 0o600)

	out, err := ctl(t, "cordon", "w1", "--coordinator", srv.URL, "--ca", ca, "--token-file", tokenFile)
	if err != nil || !strings.Contains(out, "worker w1 in ring eu/c1/orders cordoned") {
		t.Fatalf("ctl cordon over https with a token: %q (%v)", out, err)
	}
	if len(seen) != 1 || seen[0] != "POST /v1/workers/w1/cordon Bearer "+token {
		t.Fatalf("the coordinator saw %q", seen)
	}
	_, err = ctl(t, "cordon", "w1", "--coordinator", srv.URL, "--ca", ca)
	if err == nil || err.Error() != "coordinator answered 401 Unauthorized: unauthorized: a bearer token is required: pass --token-file FILE (or set RETRYRING_ADMIN_TOKEN_FILE) with an admin token" {
		t.Errorf("without a token: %v", err)
	}
	_, err = ctl(t, "cordon", "w1", "--coordinator", srv.URL, "--ca", ca, "--token-file", wrongFile)
	if err == nil || !strings.HasSuffix(err.Error(), ": check the admin token in --token-file "+wrongFile) {
		t.Errorf("with a wrong token: %v", err)
	}
	// Without --ca the test server's certificate is not trusted.
	_, err = ctl(t, "status", "--coordinator", srv.URL)
	if err == nil || !strings.Contains(err.Error(), "coordinator unreachable at "+srv.URL+": tls: failed to verify certificate") ||
		!strings.HasSuffix(err.Error(), "(give --ca with the CA that signed it)") {
		t.Errorf("without --ca: %v", err)
	}
}
