package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// fakeRegistrar is a leader's configuration and registrations, written by hand.
type fakeRegistrar struct {
	voters    map[string]bool
	have      map[string]Registration
	refuse    error // Register's answer
	committed []Registration
}

func (f *fakeRegistrar) InConfiguration(id string) bool { return f.voters[id] }
func (f *fakeRegistrar) Registered(reg Registration) bool {
	have, ok := f.have[reg.ID]
	return ok && have == reg
}
func (f *fakeRegistrar) Register(reg Registration) error {
	if f.refuse != nil {
		return f.refuse
	}
	f.committed = append(f.committed, reg)
	return nil
}

// TestRegisterChecksThenCommits: a registration is read, checked against the configuration and
// its bounds (each refusal a 400 that says what is wrong), not committed when the state holds it
// already, and otherwise committed; a refused commit is a 503, or a 400 when the registration
// itself was refused.
func TestRegisterChecksThenCommits(t *testing.T) {
	c2 := Registration{ID: "c2", RaftAddr: "h2:7000", RSocketAddr: "h2:7001", HTTPAddr: "h2:7002", FSMVersion: 6}
	f := &fakeRegistrar{voters: map[string]bool{"c2": true}, have: map[string]Registration{"c2": c2}}
	s := New(&fakeNode{view: RingView{CoordinatorID: "c1"}}, zerolog.Nop())
	s.ServeRegistrations(f)

	for _, tc := range []struct{ body, want string }{
		{`{"id":`, `{"error":"bad_request","message":"want a JSON coordinator with id, rsocket_addr and http_addr"}`},
		{`{"id":"c2","http_addr":"h2:1"}`, `{"error":"bad_request","message":"want a JSON coordinator with id, rsocket_addr and http_addr"}`},
		{`{"id":"c9","rsocket_addr":"h:1","http_addr":"h:2"}`, `{"error":"bad_request","message":"\"c9\" is not in the raft configuration"}`},
		{`{"id":"c2","rsocket_addr":"nowhere","http_addr":"h:2"}`, `{"error":"bad_request","message":"bad_request: registration: rsocket_addr \"nowhere\" is not host:port"}`},
		{`{"id":"c2","rsocket_addr":"` + strings.Repeat("a", 300) + `:1","http_addr":"h:2"}`, `{"error":"bad_request","message":"bad_request: registration: rsocket_addr longer than 256 bytes"}`},
		// Two bad addresses: the first in the JSON's order is named, every time.
		{`{"id":"c2","raft_addr":"r","rsocket_addr":"s","http_addr":"h"}`, `{"error":"bad_request","message":"bad_request: registration: raft_addr \"r\" is not host:port"}`},
		{`{"id":"c2","rsocket_addr":"h:1","http_addr":"h:2","fsm_version":-1}`, `{"error":"bad_request","message":"bad_request: registration: fsm_version -1"}`},
	} {
		rec := post(s, PathRegister, tc.body)
		if rec.Code != http.StatusBadRequest || strings.TrimSpace(rec.Body.String()) != tc.want {
			t.Errorf("register %s: %d %s, want 400 %s", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
	if len(f.committed) != 0 {
		t.Fatalf("refused registrations were committed: %+v", f.committed)
	}

	same := `{"id":"c2","raft_addr":"h2:7000","rsocket_addr":"h2:7001","http_addr":"h2:7002","fsm_version":6}`
	if rec := post(s, PathRegister, same); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"ok":true}` || len(f.committed) != 0 {
		t.Fatalf("an unchanged registration: %d %s, committed %+v", rec.Code, rec.Body, f.committed)
	}
	moved := strings.Replace(same, "h2:7001", "h3:7001", 1)
	if rec := post(s, PathRegister, moved); rec.Code != http.StatusOK || len(f.committed) != 1 || f.committed[0].RSocketAddr != "h3:7001" {
		t.Fatalf("a new address: %d %s, committed %+v", rec.Code, rec.Body, f.committed)
	}

	f.refuse = fmt.Errorf("%w: not the leader", lease.ErrNotLeader)
	if rec := post(s, PathRegister, moved); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not the leader") {
		t.Errorf("a commit refused: %d %s, want 503", rec.Code, rec.Body)
	}
	f.refuse = fmt.Errorf("%w: no", lease.ErrBadRequest)
	if rec := post(s, PathRegister, moved); rec.Code != http.StatusBadRequest {
		t.Errorf("a registration the state refused: %d %s, want 400", rec.Code, rec.Body)
	}
	f.refuse = errors.New("disk full")
	if rec := post(s, PathRegister, moved); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a commit that failed: %d %s, want 503", rec.Code, rec.Body)
	}
}
