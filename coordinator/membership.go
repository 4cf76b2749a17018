package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Membership of the Raft configuration: a node started with Config.Join asks to be added as a
// voter (PathJoin, coordinators only), and operators add and remove voters (PathAddPeer,
// PathRemovePeer; ctl add-peer and remove-peer). Every change is made by the leader, whatever node
// is called: a follower forwards the call, as it forwards every mutating admin call.
const (
	// PathJoin is the internal call of a node started with --join: POST PeerRequest.
	PathJoin = "/v1/internal/join"
	// PathAddPeer adds a voter: POST PeerRequest (id and raft_addr). Answers PeerChangeAnswer.
	PathAddPeer = "/v1/peers/add"
	// PathRemovePeer removes a voter and its registration: POST PeerRequest (id). Answers
	// PeerChangeAnswer.
	PathRemovePeer = "/v1/peers/remove"
)

// Join timing: a joining node asks every joinRetry until it is in the configuration; a change
// of the configuration may take up to peerChangeTimeout (the leader replicates it to a quorum).
const (
	joinRetry         = 500 * time.Millisecond
	peerChangeTimeout = 10 * time.Second
)

// PeerRequest names a voter: its node id and, to add it, the Raft address the others dial.
type PeerRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
}

// PeerChangeAnswer answers PathAddPeer, PathRemovePeer and PathJoin: the Raft configuration after
// the change, as the leader has it.
type PeerChangeAnswer struct {
	LeaderID string           `json:"leader_id"`
	Servers  []RaftServerView `json:"servers"`
}

// RaftServerView is one server of the Raft configuration as PeerChangeAnswer lists it.
type RaftServerView struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

func (p PeerRequest) validate(needAddr bool) error {
	switch {
	case p.ID == "" || strings.ContainsAny(p.ID, " \t\n\x00/") || len(p.ID) > 128:
		return fmt.Errorf("%w: want a node id (no spaces or slashes, at most 128 bytes), got %q", lease.ErrBadRequest, p.ID)
	case needAddr && (p.RaftAddr == "" || !strings.Contains(p.RaftAddr, ":")):
		return fmt.Errorf("%w: want the new voter's raft address as host:port, got %q", lease.ErrBadRequest, p.RaftAddr)
	}
	return nil
}

func (n *Node) serveJoin(w http.ResponseWriter, r *http.Request) {
	n.peerChange(w, r, true, n.addVoter)
}

func (n *Node) serveAddPeer(w http.ResponseWriter, r *http.Request) {
	n.peerChange(w, r, true, n.addVoter)
}

func (n *Node) serveRemovePeer(w http.ResponseWriter, r *http.Request) {
	n.peerChange(w, r, false, n.removeVoter)
}

// peerChange is mutation for the Raft configuration: authorize, read and check the body (400 on
// any node), forward to the leader from a follower, and on the leader make the change and
// answer the configuration.
func (n *Node) peerChange(w http.ResponseWriter, r *http.Request, needAddr bool, change func(PeerRequest) error) {
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	var req PeerRequest
	if err := decodeStrict(body, &req); err != nil {
		writeAdminError(w, err)
		return
	}
	if err := req.validate(needAddr); err != nil {
		writeAdminError(w, err)
		return
	}
	if t := n.currentTerm(); t == nil || !t.isReady() {
		n.forward(w, r, body)
		return
	}
	if err := change(req); err != nil {
		writeAdminError(w, err)
		return
	}
	n.log.Info().Str("path", r.URL.Path).Str("peer_id", req.ID).Str("peer_raft_addr", req.RaftAddr).
		Str("remote", r.RemoteAddr).Msg("raft configuration changed")
	servers, err := n.configuration()
	if err != nil {
		writeAdminError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, PeerChangeAnswer{LeaderID: n.cfg.NodeID, Servers: servers})
}

func (n *Node) configuration() ([]RaftServerView, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("%w: read the raft configuration: %w", lease.ErrUnavailable, err)
	}
	var out []RaftServerView
	for _, s := range f.Configuration().Servers {
		out = append(out, RaftServerView{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// addVoter adds (or re-addresses) a voter. Raft catches the new server up from a snapshot and the
// log; it registers its addresses itself once it is in the configuration. Adding a server that
// is a voter at that address already changes nothing.
func (n *Node) addVoter(p PeerRequest) error {
	servers, err := n.configuration()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == p.ID && s.RaftAddr == p.RaftAddr && s.Voter {
			return nil
		}
		if s.ID != p.ID && s.RaftAddr == p.RaftAddr {
			return fmt.Errorf("%w: raft address %s belongs to %s; remove that one first", lease.ErrBadRequest, p.RaftAddr, s.ID)
		}
	}
	return configErr(n.awaitFuture(n.raft.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.RaftAddr), 0, peerChangeTimeout)))
}

// removeVoter takes a server out of the configuration and forgets its registration (its addresses
// would otherwise stay in the ring view and in no_leader lists). The leader removing itself
// forgets its registration first: it cannot commit anything once it is out.
func (n *Node) removeVoter(p PeerRequest) error {
	servers, err := n.configuration()
	if err != nil {
		return err
	}
	in, voters := false, 0
	for _, s := range servers {
		in = in || s.ID == p.ID
		if s.Voter {
			voters++
		}
	}
	if in && voters <= 1 {
		return fmt.Errorf("%w: %s is the last voter; a cluster cannot remove its last voter", lease.ErrBadRequest, p.ID)
	}
	forget := func() error { return n.apply(&fsm.RemoveCoordinator{ID: p.ID}) }
	if p.ID == n.cfg.NodeID {
		n.leaving.Store(true)
		if err := forget(); err != nil {
			n.leaving.Store(false)
			return err
		}
		if err := configErr(n.awaitFuture(n.raft.RemoveServer(raft.ServerID(p.ID), 0, peerChangeTimeout))); err != nil {
			n.leaving.Store(false)
			return err
		}
		return nil
	}
	if in {
		if err := configErr(n.awaitFuture(n.raft.RemoveServer(raft.ServerID(p.ID), 0, peerChangeTimeout))); err != nil {
			return err
		}
	}
	return forget()
}

// configErr maps a configuration change's error to the admin API's.
func configErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: the leader changed during the configuration change; it may or may not be made (it is idempotent): retry: %w", lease.ErrNoLeader, err)
	default:
		return fmt.Errorf("%w: configuration change: %w", lease.ErrUnavailable, err)
	}
}

// joinLoop runs on a node started with Join until the node is in the Raft configuration: it asks
// each given coordinator in turn to add it (a follower forwards to the leader). Such a node never
// bootstraps (startRaft), so until then it neither votes nor stands for election.
func (n *Node) joinLoop() {
	client := n.peerHTTPClient(peerChangeTimeout + 2*time.Second)
	body, _ := json.Marshal(PeerRequest{ID: n.cfg.NodeID, RaftAddr: n.raftAddr})
	for i := 0; ; i++ {
		if n.inConfiguration(n.cfg.NodeID) {
			n.log.Info().Msg("in the raft configuration: joined")
			return
		}
		addr := n.cfg.Join[i%len(n.cfg.Join)]
		err := n.askToJoin(client, addr, body)
		if err == nil {
			continue // check the configuration at once: the leader replicates it to this node
		}
		n.log.Warn().Err(err).Str("join_addr", addr).Msg("join request failed; retrying")
		select {
		case <-n.stop:
			return
		case <-time.After(joinRetry):
		}
	}
}

func (n *Node) askToJoin(client *http.Client, addr string, body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), peerChangeTimeout+2*time.Second)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.adminURL(addr, PathJoin), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	n.signInternal(req)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(answer)))
	}
	// Wait a moment for the configuration entry to reach this node before asking again.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && !n.inConfiguration(n.cfg.NodeID) {
		select {
		case <-n.stop:
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// adminURL is the URL of path on a coordinator's admin HTTP address (host:port, or a URL); a bare
// address gets the scheme the coordinators speak among themselves (peerScheme).
func (n *Node) adminURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = n.peerScheme() + "://" + addr
	}
	return strings.TrimRight(addr, "/") + path
}
