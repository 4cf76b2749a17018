package executor

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/window"
	"github.com/retryring/retryring/worker"
	"github.com/retryring/retryring/worker/retrypolicy"
)

func task() worker.Task {
	return worker.Task{
		TransactionID: "tx-1", ServiceName: "orders", Region: "eu", Cluster: "c1", InstanceID: "pod-a",
		AllocationKey: "alloc", ImplType: "Payment", Attempt: 2,
		Window:   window.Window{Day: window.Date{Year: 2026, Month: time.March, Day: 9}, Minute: 615, Length: 5},
		WorkerID: "w1", LeaseEpoch: 7,
	}
}

func TestHTTPSendsTheTaskWithAnIdempotencyKey(t *testing.T) {
	type seen struct {
		body   map[string]any
		header http.Header
	}
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		s.header = r.Header.Clone()
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &s.body); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
		got = append(got, s)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ex, err := NewHTTP(HTTPConfig{URL: srv.URL + "/retry"})
	if err != nil {
		t.Fatal(err)
	}
	first, later, replayed := task(), task(), task()
	later.Attempt, later.WorkerID, later.LeaseEpoch, later.Window.Minute = 5, "w2", 9, 640
	replayed.Replay = 1
	for _, tk := range []worker.Task{first, later, replayed} {
		if out := ex.Execute(context.Background(), tk); out.Kind != worker.Done || out.Status != 204 || out.Err != nil {
			t.Fatalf("outcome %+v, want done", out)
		}
	}
	want := map[string]any{
		"transaction_id": "tx-1", "service_name": "orders", "region": "eu", "cluster": "c1",
		"instance_id": "pod-a", "allocation_key": "alloc", "impl_type": "Payment", "replay": 0.0,
	}
	if len(got[0].body) != len(want) {
		t.Fatalf("body %v has %d fields, want %d", got[0].body, len(got[0].body), len(want))
	}
	for k, v := range want {
		if got[0].body[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, got[0].body[k], got[0].body[k], v)
		}
	}
	// Another attempt of the same step: the same key and the same body; what changed is in headers.
	if !maps.Equal(got[0].body, got[1].body) {
		t.Errorf("the body changed between attempts: %v, then %v", got[0].body, got[1].body)
	}
	for i, w := range []map[string]string{
		{IdempotencyHeader: "tx-1:Payment", AttemptHeader: "3", WorkerHeader: "w1", LeaseEpochHeader: "7", WindowHeader: "2026-03-09/615", "Content-Type": "application/json"},
		{IdempotencyHeader: "tx-1:Payment", AttemptHeader: "6", WorkerHeader: "w2", LeaseEpochHeader: "9", WindowHeader: "2026-03-09/640"},
		{IdempotencyHeader: "tx-1:Payment:r1"},
	} {
		for h, v := range w {
			if g := got[i].header.Get(h); g != v {
				t.Errorf("request %d: %s = %q, want %q", i, h, g, v)
			}
		}
	}
	if got[2].body["replay"] != 1.0 {
		t.Errorf("replayed body %v, want replay 1", got[2].body)
	}
}

func TestHTTPClassifiesStatuses(t *testing.T) {
	cases := map[int]worker.OutcomeKind{
		200: worker.Done, 201: worker.Done, 204: worker.Done, 409: worker.Done,
		500: worker.Transient, 502: worker.Transient, 503: worker.Transient, 504: worker.Transient,
		408: worker.Transient, 425: worker.Transient, 429: worker.Transient,
		400: worker.Permanent, 401: worker.Permanent, 403: worker.Permanent, 404: worker.Permanent,
		410: worker.Permanent, 422: worker.Permanent,
		304: worker.Transient,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status int
		for code := range cases {
			if r.URL.Path == "/"+http.StatusText(code) {
				status = code
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "why: "+http.StatusText(status))
	}))
	defer srv.Close()
	for code, want := range cases {
		ex, err := NewHTTP(HTTPConfig{URL: srv.URL + "/" + http.StatusText(code)})
		if err != nil {
			t.Fatal(err)
		}
		out := ex.Execute(context.Background(), task())
		if out.Kind != want || out.Status != code {
			t.Errorf("status %d: %+v, want %v", code, out, want)
		}
		if want != worker.Done && code != 304 && (out.Err == nil || !strings.Contains(out.Err.Error(), "why:")) {
			t.Errorf("status %d: error %v should quote the response", code, out.Err)
		}
	}
}

func TestHTTPTransportFailuresAreTransient(t *testing.T) {
	// Refused: a port that was listening a moment ago.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ex, _ := NewHTTP(HTTPConfig{URL: "http://" + addr + "/"})
	out := ex.Execute(context.Background(), task())
	if out.Kind != worker.Transient || out.Status != 0 || !strings.Contains(out.Err.Error(), "refused") {
		t.Fatalf("refused connection: %+v", out)
	}

	// Timeout: the server answers after the execution's deadline.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ex, _ = NewHTTP(HTTPConfig{URL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out = ex.Execute(ctx, task())
	if out.Kind != worker.Transient || !strings.Contains(out.Err.Error(), "timeout") {
		t.Fatalf("timeout: %+v", out)
	}
}

func TestNewHTTPRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x/y", "http://", "::"} {
		if _, err := NewHTTP(HTTPConfig{URL: u}); err == nil {
			t.Errorf("NewHTTP(%q) accepted", u)
		}
	}
}

// answering is a downstream that answers ?status= with ?retry_after= as its Retry-After.
func answering(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		status, err := strconv.Atoi(r.URL.Query().Get("status"))
		if err != nil {
			t.Errorf("status: %v", err)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPReportsRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 9, 10, 15, 0, 0, time.UTC)
	srv := answering(t)
	cases := []struct {
		status     int
		retryAfter string
		want       time.Duration
	}{
		{429, "120", 2 * time.Minute},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second}, // read against the executor's clock
		{503, "7200", 2 * time.Hour}, // uncapped here: the worker's policy caps it
		{503, "soon", 0},             // ignored, the failure still transient
		{429, "", 0},                 // none given
		{500, "120", 0},              // only 429 and 503 carry it
		{404, "120", 0},              // permanent: no retry to delay
	}
	for _, c := range cases {
		query := url.Values{"status": {strconv.Itoa(c.status)}, "retry_after": {c.retryAfter}}.Encode()
		ex, err := NewHTTP(HTTPConfig{URL: srv.URL + "/?" + query, now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		out := ex.Execute(context.Background(), task())
		if out.Status != c.status || out.RetryAfter != c.want || (c.status != 404 && out.Kind != worker.Transient) {
			t.Errorf("%d with Retry-After %q: %+v, want transient with RetryAfter %v", c.status, c.retryAfter, out, c.want)
		}
	}
}

func TestHTTPClassifiesByTheStepsPolicy(t *testing.T) {
	set, err := retrypolicy.Parse("p.yaml", []byte("default:\n  done_statuses: [404]\nPayment:\n  transient_statuses: [409]\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := answering(t)
	cases := []struct {
		impl   string
		status int
		want   worker.OutcomeKind
	}{
		{"Payment", 409, worker.Transient}, // its own override
		{"Payment", 404, worker.Done},      // inherited from default
		{"Inventory", 409, worker.Done},    // the built-in rule
		{"Inventory", 404, worker.Done},
		{"Inventory", 400, worker.Permanent},
	}
	for _, c := range cases {
		ex, err := NewHTTP(HTTPConfig{URL: srv.URL + "/?status=" + strconv.Itoa(c.status), Policies: set})
		if err != nil {
			t.Fatal(err)
		}
		tk := task()
		tk.ImplType = c.impl
		if out := ex.Execute(context.Background(), tk); out.Kind != c.want {
			t.Errorf("%s answered %d: %+v, want %v", c.impl, c.status, out, c.want)
		}
	}
}
