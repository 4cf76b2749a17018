package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Registration retry periods: quick until the node sees itself in the replicated state, then a
// slow check in case a snapshot restore or an operator removed it.
const (
	registerRetry = 200 * time.Millisecond
	registerCheck = 5 * time.Second
)

// registerLoop makes this node's RSocket and HTTP addresses part of the replicated state, so that
// followers can redirect workers to the leader and reach it over HTTP. The leader commits its own
// registration; a follower posts its registration to the leader's /v1/internal/register, learning
// the leader's HTTP address from the state (the leader registers first), until it sees itself.
func (n *Node) registerLoop() {
	client := n.peerHTTPClient(2 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-n.registerKick:
		case <-timer.C:
		}
		next := registerRetry
		if n.registerOnce(ctx, client) {
			next = registerCheck
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

func (n *Node) selfRegistration() fsm.Coordinator {
	return fsm.Coordinator{ID: n.cfg.NodeID, RaftAddr: n.raftAddr, RSocketAddr: n.rsocketAddr, HTTPAddr: n.httpAddr,
		FSMVersion: n.fsm.Version()}
}

// registerOnce reports whether the state already holds this node's current addresses; if not, it
// makes one attempt to register them.
func (n *Node) registerOnce(ctx context.Context, client *http.Client) bool {
	if n.leaving.Load() {
		return true
	}
	want := n.selfRegistration()
	var have *fsm.Coordinator
	var leaderHTTP string
	_, leader := n.raft.LeaderWithID()
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if c := s.Coordinators[want.ID]; c != nil {
			cc := *c
			have = &cc
		}
		if c := s.Coordinators[string(leader)]; c != nil {
			leaderHTTP = c.HTTPAddr
		}
	})
	if have != nil && *have == want {
		return true
	}
	if t := n.currentTerm(); t != nil {
		t.mu.Lock()
		caughtUp := t.caughtUp
		t.mu.Unlock()
		if caughtUp && !n.leaving.Load() {
			if err := t.apply(&fsm.RegisterCoordinator{Coordinator: want}); err != nil {
				n.log.Warn().Err(err).Msg("self registration failed")
			}
		}
		return false
	}
	if leader == "" || leaderHTTP == "" {
		return false
	}
	body, _ := json.Marshal(want)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.peerURL(leaderHTTP, admin.PathRegister), bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	n.signInternal(req)
	resp, err := client.Do(req)
	if mismatch := n.explainPeerHTTP(leaderHTTP, resp, err); mismatch != nil {
		n.tlsLog.peer.Log(n.log, "registration with the leader failed", mismatch)
	}
	if err != nil {
		n.log.Debug().Err(err).Str("leader_http_addr", leaderHTTP).Msg("registration with the leader failed")
		return false
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		n.log.Debug().Int("status", resp.StatusCode).Msg("leader refused the registration")
	}
	return false
}

// anyRegisteredBelow reports whether a server of the Raft configuration registered an FSM
// version below v: a rolling upgrade from an older release is under way.
func (n *Node) anyRegisteredBelow(v int) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	below := false
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for _, srv := range f.Configuration().Servers {
			if c := s.Coordinators[string(srv.ID)]; c != nil && c.RunsVersion() < v {
				below = true
			}
		}
	})
	return below
}

// versionGate refuses cmd while a server of the Raft configuration may not know it: it registered
// an FSM version below the one that introduced cmd's type, or no version at all yet (it may be
// an old node that has not registered since it started). Such a server would stop applying the
// log at cmd; the gate keeps a rolling upgrade from ever running into that. This node's own
// version is its build's, registered or not.
func (n *Node) versionGate(cmd fsm.Command) error {
	need := cmd.Type().Since()
	if need <= 1 {
		return nil // every version knows the lease commands
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("%w: read the raft configuration: %w", lease.ErrUnavailable, err)
	}
	var behind []string
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for _, srv := range f.Configuration().Servers {
			id := string(srv.ID)
			switch c := s.Coordinators[id]; {
			case id == n.cfg.NodeID:
				if v := n.fsm.Version(); v < need {
					behind = append(behind, fmt.Sprintf("%s (this node) runs version %d", id, v))
				}
			case c == nil:
				// Seen after a mistyped --peers: the configuration names a voter at an address
				// nobody listens on, and it never registers. Say so rather than blame the upgrade.
				behind = append(behind, fmt.Sprintf("%s has not registered its version (it never reached the leader: is it running, and listening at %s, "+
					"its address in the raft configuration? a mistyped --peers gives a voter an address nobody listens on; see ctl peers)", id, srv.Address))
			case c.RunsVersion() < need:
				behind = append(behind, fmt.Sprintf("%s registered version %d", id, c.RunsVersion()))
			}
		}
	})
	if len(behind) > 0 {
		return fmt.Errorf("%w: %s needs FSM version %d on every coordinator, and %s: finish the rolling upgrade first",
			ErrUpgradeIncomplete, cmd.Type(), need, strings.Join(behind, ", "))
	}
	return nil
}

// peerHTTPAddr is the admin address a coordinator registered, or "".
func (n *Node) peerHTTPAddr(id string) string {
	var addr string
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if c := s.Coordinators[id]; c != nil {
			addr = c.HTTPAddr
		}
	})
	return addr
}
