package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// leaderView is a leader's GET /v1/ring with reports (docs/protocol.md section 7.3): Node-0 fresh
// with an open breaker, the other member unknown.
const leaderView = `{"coordinator_id":"c1","leader_id":"c1","raft_term":4,
 "coordinators":[{"id":"c1","raft_addr":"127.0.0.1:7400","rsocket_addr":"127.0.0.1:7878","http_addr":"127.0.0.1:7480","state":"leader","voter":true}],
 "rings":[{"region":"eu","cluster":"c1","service":"orders","generation":5,
  "members":[
   {"worker_id":"w1","incarnation":"a","node_index":0,"epoch":12,"ranges":[{"start":"-9223372036854775808","end":"-1"}],"lease_expires_ms":0,"state":"active",
    "report":{"state":"fresh","age_ms":1200,"executions_per_s":{"done":3,"transient":0.25},"dead_letters_per_hour":0,"worker_id":"w1",
     "executions":{"done":300,"transient":25},"dead_lettered":0,"guard_refusals":0,
     "breakers":[{"impl":"Payment","state":"open","open_until_ms":1764590405000}],"oldest_window_start_ms":0,"pending_rows":42,
     "directory_oldest_window_start_ms":1764590000000,
     "clock":{"offset_us":-1250000,"uncertainty_us":400,"limit_us":1000000,"age_ms":3000,"trusted":false}}},
   {"worker_id":"w2","incarnation":"b","node_index":1,"epoch":12,"ranges":[{"start":"0","end":"9223372036854775807"}],"lease_expires_ms":0,"state":"active",
    "report":{"state":"unknown","age_ms":null}}],
  "backlog":{"state":"fresh","age_ms":252000,"oldest_window_start_ms":1764590000000,"pending_rows":42,
   "executions_per_s":{"done":3,"transient":0.25,"permanent":0,"not_sent":0},"dead_letters_per_hour":0,
   "open_breakers":[{"worker_id":"w1","impl":"Payment","state":"open","open_until_ms":1764590405000}],
   "reports_unknown":["w2"],"lease_unfit":[]}}]}`

func runCtlRing(t *testing.T, body string, args ...string) (string, error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/ring" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"ctl", "ring", "--coordinator", srv.URL}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestCtlRingShowsReportsAndBacklog: the table has the ring's backlog line, its breaker and the
// unknown member, and a report column per member; a member whose clock is untrusted gets a note
// with its offset and the limit.
func TestCtlRingShowsReportsAndBacklog(t *testing.T) {
	out, err := runCtlRing(t, leaderView)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"backlog age 4m12s (fresh)  pending 42  exec/s done=3.00 transient=0.25 permanent=0.00 not_sent=0.00  breakers 1  dead letters/h 0.0  reports unknown 1",
		"breaker w1 Payment open until 12:00:05 UTC",
		"report unknown: w2",
		"REPORT", "PENDING", "EXEC/S", "BREAKERS", "CLOCK",
		"clock untrusted (beyond half of max_clock_offset from Cassandra; fix the host's time sync): w1 -1250.0 ms ± 0.4 ms (limit ±1000 ms)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ctl ring lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	var w1, w2 string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "0 (Node-0)"):
			w1 = l
		case strings.HasPrefix(l, "1 "):
			w2 = l
		}
	}
	if f := strings.Fields(w1); len(f) < 11 || f[6] != "fresh" || f[7] != "1.2s" || f[8] != "42" || f[9] != "3.25" || f[10] != "1" {
		t.Errorf("w1's row %q; want fresh 1.2s, 42 pending, 3.25 exec/s, 1 breaker", w1)
	}
	if f := strings.Fields(w2); len(f) < 9 || f[5] != "unknown" || f[6] != "-" || f[7] != "-" {
		t.Errorf("w2's row %q; want unknown and no figures", w2)
	}
}

// TestCtlRingOnAFollower: a view without reports says where they are instead of a backlog.
func TestCtlRingOnAFollower(t *testing.T) {
	follower := `{"coordinator_id":"c2","leader_id":"c1","raft_term":4,"coordinators":[],
	 "rings":[{"region":"eu","cluster":"c1","service":"orders","generation":5,"members":[
	  {"worker_id":"w1","node_index":0,"epoch":12,"ranges":[],"lease_expires_ms":0,"state":"active"}]}]}`
	out, err := runCtlRing(t, follower)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "backlog: not on this coordinator (the leader keeps the reports; ask it)") {
		t.Errorf("follower's ring:\n%s", out)
	}
}

// TestCtlRingJSONPassesTheViewThrough: -o json prints the coordinator's answer as it came.
func TestCtlRingJSONPassesTheViewThrough(t *testing.T) {
	out, err := runCtlRing(t, leaderView, "-o", "json")
	if err != nil || out != leaderView {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	if _, err := runCtlRing(t, leaderView, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "table or json") {
		t.Errorf("-o yaml: %v; want a refusal", err)
	}
}

// TestCtlRingSaysWhetherTheRingIsAtRest: a ring whose active members tile it with node indexes
// 0..N-1 is at rest; one with a member still joining, a gap, or an old incarnation still listed
// says which.
func TestCtlRingSaysWhetherTheRingIsAtRest(t *testing.T) {
	out, err := runCtlRing(t, leaderView)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "at rest: yes, 2 members tile the ring with node indexes 0..1") {
		t.Errorf("a settled ring:\n%s", out)
	}
	ring := func(members string) string {
		return `{"coordinator_id":"c1","leader_id":"c1","raft_term":4,"coordinators":[],
		 "rings":[{"region":"eu","cluster":"c1","service":"orders","generation":6,"members":[` + members + `]}]}`
	}
	const (
		low  = `{"worker_id":"w1","node_index":0,"epoch":12,"ranges":[{"start":"-9223372036854775808","end":"-1"}],"state":"active"}`
		high = `{"worker_id":"w2","node_index":1,"epoch":12,"ranges":[{"start":"0","end":"9223372036854775807"}],"state":"active"}`
	)
	for _, c := range []struct{ name, members, want string }{
		{"a member joining", low + `,` + high + `,{"worker_id":"w3","node_index":-1,"epoch":0,"ranges":[],"state":"joining"}`, "at rest: no, w3 is joining"},
		{"an old incarnation still listed", low + `,` + high + `,{"worker_id":"w2","node_index":-1,"epoch":9,"ranges":[],"state":"departed"}`, "at rest: no, w2 is departed"},
		{"a gap", low, "at rest: no, the members hold"},
		{"no member", ``, "at rest: no members"},
		{"one member", `{"worker_id":"w1","node_index":0,"epoch":12,"ranges":[{"start":"-9223372036854775808","end":"9223372036854775807"}],"state":"active"}`,
			"at rest: yes, 1 member holds the whole ring as Node-0"},
	} {
		out, err := runCtlRing(t, ring(c.members))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: want %q in:\n%s", c.name, c.want, out)
		}
	}
}
