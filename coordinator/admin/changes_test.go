package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// fakeChanger is the Raft side of a coordinator, written by hand: it leads or not, records the
// changes it is asked to commit and the calls it forwards, and answers what it is told to.
type fakeChanger struct {
	leads     bool
	commitErr error
	committed Committed
	changes   []Change
	forwarded []string // path and body of each forwarded call
	answer    Forwarded
	fwdErr    error
	peers     []string // each AddVoter and RemoveVoter: "add id addr" or "remove id"
	peerErr   error
	servers   []RaftServerView
	stepDown  StepDownAnswer
	stepTo    []string
	stepErr   error
}

func (f *fakeChanger) AddVoter(p PeerRequest) error {
	f.peers = append(f.peers, "add "+p.ID+" "+p.RaftAddr)
	return f.peerErr
}

func (f *fakeChanger) RemoveVoter(p PeerRequest) error {
	f.peers = append(f.peers, "remove "+p.ID)
	return f.peerErr
}

func (f *fakeChanger) Configuration() ([]RaftServerView, error) { return f.servers, nil }

func (f *fakeChanger) StepDown(_ context.Context, to string) (StepDownAnswer, error) {
	f.stepTo = append(f.stepTo, to)
	if !f.leads {
		return StepDownAnswer{}, ErrNotLeading
	}
	return f.stepDown, f.stepErr
}

func (f *fakeChanger) Leads() bool { return f.leads }

func (f *fakeChanger) Commit(c Change) (Committed, error) {
	f.changes = append(f.changes, c)
	if !f.leads {
		return Committed{}, ErrNotLeading
	}
	return f.committed, f.commitErr
}

func (f *fakeChanger) Forward(r *http.Request, body []byte) (Forwarded, error) {
	f.forwarded = append(f.forwarded, r.URL.Path+" "+string(body))
	return f.answer, f.fwdErr
}

func changeServer(c *fakeChanger) *Server {
	s := New(&fakeNode{view: RingView{CoordinatorID: "c1"}}, zerolog.Nop())
	s.ServeChanges(c)
	return s
}

func post(s *Server, path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// leaderSays is what the fake leader answers a forwarded call: a status no handler here uses.
var leaderSays = Forwarded{Status: http.StatusConflict, ContentType: "application/json", Body: []byte(`{"error":"upgrade_incomplete","message":"x"}`)}

var ring = lease.RingKey{Region: "eu", Cluster: "c1", Service: "orders"}

// TestRingCallsReadTheirChange: each ring call becomes its change with the ring of its path, and
// the leader's answer is the controls (or the movement setting) it read back, with its id.
func TestRingCallsReadTheirChange(t *testing.T) {
	rate := 120.5
	f := &fakeChanger{leads: true, committed: Committed{Controls: ControlsView{PausedImpl: []string{"payment"}, RatePerS: &rate},
		Movement: MovementView{Mode: "minimal", StepMoves: 8}}}
	s := changeServer(f)
	for _, tc := range []struct {
		action, body string
		want         Change
		answer       string
	}{
		{ActionPause, `{"impl":["payment"],"reason":"provider down"}`, Pause{Ring: ring, PauseRequest: PauseRequest{Impl: []string{"payment"}, Reason: "provider down"}},
			`{"ring":{"region":"eu","cluster":"c1","service":"orders"},"controls":{"paused":false,"paused_impl":["payment"],"reason":"","rate_per_s":120.5,"since_ms":0},"leader_id":"c1"}`},
		{ActionResume, ``, Resume{Ring: ring}, ""},
		{ActionLimit, `{"per_second":120.5}`, Limit{Ring: ring, PerSecond: 120.5}, ""},
		{ActionLimit, `{"clear":true}`, Limit{Ring: ring, Clear: true}, ""},
		{ActionMovement, `{"mode":"minimal","step_moves":8}`, SetMovement{Ring: ring, MovementRequest: MovementRequest{Mode: "minimal", StepMoves: ptr(8)}},
			`{"ring":{"region":"eu","cluster":"c1","service":"orders"},"movement":{"mode":"minimal","step_moves":8},"leader_id":"c1"}`},
	} {
		f.changes = nil
		rec := post(s, PathRings+"eu/c1/orders/"+tc.action, tc.body)
		if rec.Code != http.StatusOK || !reflect.DeepEqual(f.changes, []Change{tc.want}) {
			t.Errorf("%s %s: %d %q, changes %+v, want %+v", tc.action, tc.body, rec.Code, rec.Body.String(), f.changes, tc.want)
		}
		if tc.answer != "" && rec.Body.String() != tc.answer+"\n" {
			t.Errorf("%s: answered %q, want %q", tc.action, rec.Body.String(), tc.answer)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestRingCallsRefuseBadInputWithoutTheNode: a limit call must say one of the two and a rate
// above 0, a body must be strict JSON; such a call never reaches the node.
func TestRingCallsRefuseBadInputWithoutTheNode(t *testing.T) {
	f := &fakeChanger{}
	s := changeServer(f)
	for body, want := range map[string]string{
		`{}`:                            `{"error":"bad_request","message":"send {\"per_second\": N} to set the limit or {\"clear\": true} to remove it, one of the two"}`,
		`{"per_second":5,"clear":true}`: `{"error":"bad_request","message":"send {\"per_second\": N} to set the limit or {\"clear\": true} to remove it, one of the two"}`,
		`{"per_second":-3}`:             `{"error":"bad_request","message":"per_second must be above 0, got -3 (to remove the limit, send {\"clear\": true})"}`,
		`{"per_second":1,"burst":2}`:    `{"error":"bad_request","message":"body: json: unknown field \"burst\""}`,
	} {
		if rec := post(s, PathRings+"eu/c1/orders/limit", body); rec.Code != http.StatusBadRequest || rec.Body.String() != want+"\n" {
			t.Errorf("limit %s: %d %q, want 400 %q", body, rec.Code, rec.Body.String(), want)
		}
	}
	if len(f.changes)+len(f.forwarded) != 0 {
		t.Fatalf("bad input reached the node: %+v %+v", f.changes, f.forwarded)
	}
	if rec := post(s, PathRings+"eu/c1/orders/explode", `{}`); rec.Code != http.StatusNotFound ||
		rec.Body.String() != `{"error":"not_found","message":"no action \"explode\": want POST /v1/rings/{region}/{cluster}/{service}/pause|resume|limit|movement"}`+"\n" {
		t.Errorf("unknown action: %d %q", rec.Code, rec.Body.String())
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathWorkers+"w1/cordon", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodPost ||
		rec.Body.String() != `{"error":"method_not_allowed","message":"GET /v1/workers/w1/cordon"}`+"\n" {
		t.Errorf("GET cordon: %d %q", rec.Code, rec.Body.String())
	}
}

// TestFollowerForwardsOnce: a node that does not lead forwards the call with its body and copies
// the leader's answer as it came; a call forwarded already is refused no_leader, not forwarded
// again; a worker call is forwarded before its body is read; a leader that cannot be reached is
// the node's error.
func TestFollowerForwardsOnce(t *testing.T) {
	f := &fakeChanger{answer: leaderSays}
	s := changeServer(f)
	rec := post(s, PathRings+"eu/c1/orders/pause", `{"reason":"r"}`)
	if rec.Code != http.StatusConflict || rec.Body.String() != `{"error":"upgrade_incomplete","message":"x"}` ||
		strings.Join(f.forwarded, ";") != PathRings+`eu/c1/orders/pause {"reason":"r"}` {
		t.Errorf("forwarded pause: %d %q, forwarded %q", rec.Code, rec.Body.String(), f.forwarded)
	}
	f.forwarded = nil
	rec = post(s, PathRings+"eu/c1/orders/pause", `{}`, HeaderForwardedBy, "c2")
	if rec.Code != http.StatusServiceUnavailable || len(f.forwarded) != 0 ||
		rec.Body.String() != `{"error":"no_leader","message":"c2 forwarded this call to c1, which does not lead (an election may be under way); retry"}`+"\n" {
		t.Errorf("a call forwarded twice: %d %q, forwarded %q", rec.Code, rec.Body.String(), f.forwarded)
	}
	f.changes = nil
	rec = post(s, PathWorkers+"w%2F1/cordon", `not json`)
	if rec.Code != http.StatusConflict || len(f.changes) != 0 || strings.Join(f.forwarded, ";") != PathWorkers+"w/1/cordon not json" {
		t.Errorf("forwarded cordon: %d %q, changes %+v, forwarded %q", rec.Code, rec.Body.String(), f.changes, f.forwarded)
	}
	f.fwdErr = fmt.Errorf("%w: leader c3 at 127.0.0.1:1 did not answer: refused", lease.ErrUnavailable)
	if rec := post(s, PathRings+"eu/c1/orders/resume", ``); rec.Code != http.StatusServiceUnavailable ||
		rec.Body.String() != `{"error":"unavailable","message":"leader c3 at 127.0.0.1:1 did not answer: refused"}`+"\n" {
		t.Errorf("unreachable leader: %d %q", rec.Code, rec.Body.String())
	}
}

// TestCordonOnTheLeader: the leader reads the body (its ring, if named) into the change and
// answers the ring it found and the cordon as read back; the node's refusals keep their status.
func TestCordonOnTheLeader(t *testing.T) {
	f := &fakeChanger{leads: true, committed: Committed{Ring: ring, Cordoned: true}}
	s := changeServer(f)
	rec := post(s, PathWorkers+"w1/cordon", ``)
	if rec.Code != http.StatusOK || !reflect.DeepEqual(f.changes, []Change{Cordon{WorkerID: "w1"}}) ||
		rec.Body.String() != `{"ring":{"region":"eu","cluster":"c1","service":"orders"},"worker_id":"w1","cordoned":true,"leader_id":"c1"}`+"\n" {
		t.Errorf("cordon: %d %q, changes %+v", rec.Code, rec.Body.String(), f.changes)
	}
	f.changes = nil
	post(s, PathWorkers+"w1/uncordon", `{"ring":{"region":"eu","cluster":"c1","service":"orders"}}`)
	if want := (Cordon{WorkerID: "w1", Clear: true, CordonRequest: CordonRequest{Ring: &ring}}); !reflect.DeepEqual(f.changes, []Change{want}) {
		t.Errorf("uncordon naming the ring: changes %+v", f.changes)
	}
	f.commitErr = fmt.Errorf("%w: no worker %q in any ring", lease.ErrUnknownWorker, "w9")
	if rec := post(s, PathWorkers+"w9/cordon", `{}`); rec.Code != http.StatusNotFound ||
		rec.Body.String() != `{"error":"unknown_worker","message":"no worker \"w9\" in any ring"}`+"\n" {
		t.Errorf("unknown worker: %d %q", rec.Code, rec.Body.String())
	}
	if rec := post(s, PathWorkers+"w1/cordon", `{"ring":1}`); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "body: json: cannot unmarshal") {
		t.Errorf("a bad body on the leader: %d %q", rec.Code, rec.Body.String())
	}
}

// TestPeerCallsCheckThenGoToTheLeader: a peer call's body is checked on any node (a node id, and
// a raft address to add one), forwarded by a node that does not lead, and on the leader made
// through the node and answered with the configuration; a conflict keeps its 409.
func TestPeerCallsCheckThenGoToTheLeader(t *testing.T) {
	f := &fakeChanger{answer: leaderSays, servers: []RaftServerView{{ID: "c1", RaftAddr: "10.0.0.1:7000", Voter: true}, {ID: "c4", RaftAddr: "10.0.0.4:7000", Voter: true}}}
	s := changeServer(f)
	for path, tc := range map[string]struct{ body, want string }{
		PathAddPeer:    {`{"id":"c 4","raft_addr":"10.0.0.4:7000"}`, `{"error":"bad_request","message":"want a node id (no spaces or slashes, at most 128 bytes), got \"c 4\""}`},
		PathJoin:       {`{"id":"c4","raft_addr":"10.0.0.4"}`, `{"error":"bad_request","message":"want the new voter's raft address as host:port, got \"10.0.0.4\""}`},
		PathRemovePeer: {`{"id":"c4","port":1}`, `{"error":"bad_request","message":"body: json: unknown field \"port\""}`},
	} {
		if rec := post(s, path, tc.body); rec.Code != http.StatusBadRequest || rec.Body.String() != tc.want+"\n" {
			t.Errorf("%s %s: %d %q, want 400 %q", path, tc.body, rec.Code, rec.Body.String(), tc.want)
		}
	}
	if rec := post(s, PathRemovePeer, `{"id":"c4"}`); rec.Code != http.StatusConflict || len(f.peers) != 0 || strings.Join(f.forwarded, ";") != PathRemovePeer+` {"id":"c4"}` {
		t.Errorf("remove-peer on a follower: %d %q, peers %q, forwarded %q", rec.Code, rec.Body.String(), f.peers, f.forwarded)
	}
	f.leads = true
	rec := post(s, PathAddPeer, `{"id":"c4","raft_addr":"10.0.0.4:7000"}`)
	if rec.Code != http.StatusOK || strings.Join(f.peers, ";") != "add c4 10.0.0.4:7000" ||
		rec.Body.String() != `{"leader_id":"c1","servers":[{"id":"c1","raft_addr":"10.0.0.1:7000","voter":true},{"id":"c4","raft_addr":"10.0.0.4:7000","voter":true}]}`+"\n" {
		t.Errorf("add-peer on the leader: %d %q, peers %q", rec.Code, rec.Body.String(), f.peers)
	}
	f.peerErr = fmt.Errorf("%w: node id c4 is a voter already, at 10.0.0.4:7000", ErrPeerConflict)
	if rec := post(s, PathJoin, `{"id":"c4","raft_addr":"10.0.0.9:7000","empty_log":true}`); rec.Code != http.StatusConflict ||
		rec.Body.String() != `{"error":"peer_conflict","message":"node id c4 is a voter already, at 10.0.0.4:7000"}`+"\n" {
		t.Errorf("a conflicting join: %d %q", rec.Code, rec.Body.String())
	}
}

// TestStepDownForwardsUnlessRaftLeads: a node that is not Raft's leader forwards the call; the
// leader answers who took over; a bad voter name is the node's 400.
func TestStepDownForwardsUnlessRaftLeads(t *testing.T) {
	f := &fakeChanger{answer: leaderSays}
	s := changeServer(f)
	if rec := post(s, PathStepDown, `{"to":"c2"}`); rec.Code != http.StatusConflict || strings.Join(f.forwarded, ";") != PathStepDown+` {"to":"c2"}` {
		t.Errorf("step-down on a follower: %d %q, forwarded %q", rec.Code, rec.Body.String(), f.forwarded)
	}
	if rec := post(s, PathStepDown, `{"to":2}`); rec.Code != http.StatusBadRequest || len(f.stepTo) != 1 {
		t.Errorf("a bad body: %d %q, asked %q", rec.Code, rec.Body.String(), f.stepTo)
	}
	f.leads, f.stepDown = true, StepDownAnswer{PreviousLeader: "c1", LeaderID: "c2", Term: 4, TookMs: 120}
	if rec := post(s, PathStepDown, ``); rec.Code != http.StatusOK || f.stepTo[len(f.stepTo)-1] != "" ||
		rec.Body.String() != `{"previous_leader":"c1","leader_id":"c2","term":4,"took_ms":120}`+"\n" {
		t.Errorf("step-down on the leader: %d %q", rec.Code, rec.Body.String())
	}
	f.stepErr = fmt.Errorf("%w: %q is not a voter of the raft configuration", lease.ErrBadRequest, "c9")
	if rec := post(s, PathStepDown, `{"to":"c9"}`); rec.Code != http.StatusBadRequest ||
		rec.Body.String() != `{"error":"bad_request","message":"\"c9\" is not a voter of the raft configuration"}`+"\n" {
		t.Errorf("step-down to a stranger: %d %q", rec.Code, rec.Body.String())
	}
}
