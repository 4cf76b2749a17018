package admin

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/retryring/retryring/lease"
)

// Membership of the Raft configuration: a node started with --join asks to be added as a voter
// (PathJoin, coordinators only), and operators add and remove voters (PathAddPeer,
// PathRemovePeer; ctl add-peer and remove-peer). Every change is made by the leader, whatever node
// is called: a follower forwards the call, as it forwards every call that changes something.
const (
	// PathJoin is the internal call of a node started with --join: POST PeerRequest.
	PathJoin = "/v1/internal/join"
	// PathAddPeer adds a voter: POST PeerRequest (id and raft_addr). Answers PeerChangeAnswer.
	PathAddPeer = "/v1/peers/add"
	// PathRemovePeer removes a voter and its registration: POST PeerRequest (id). Answers
	// PeerChangeAnswer.
	PathRemovePeer = "/v1/peers/remove"
)

// ValidNodeID reports whether id may name a coordinator: not empty, no spaces or slashes, at most
// 128 bytes. It is here because the peer calls check it; the coordinator's flags do too.
func ValidNodeID(id string) bool {
	return id != "" && !strings.ContainsAny(id, " \t\n\x00/") && len(id) <= 128
}

// validatePeer checks p: a node id, and a Raft address when needAddr (to add it).
func validatePeer(p PeerRequest, needAddr bool) error {
	switch {
	case !ValidNodeID(p.ID):
		return fmt.Errorf("%w: want a node id (no spaces or slashes, at most 128 bytes), got %q", lease.ErrBadRequest, p.ID)
	case needAddr && (p.RaftAddr == "" || !strings.Contains(p.RaftAddr, ":")):
		return fmt.Errorf("%w: want the new voter's raft address as host:port, got %q", lease.ErrBadRequest, p.RaftAddr)
	}
	return nil
}

func (s *Server) serveAddPeer(w http.ResponseWriter, r *http.Request) {
	s.peerChange(w, r, true, s.changer.AddVoter)
}

func (s *Server) serveRemovePeer(w http.ResponseWriter, r *http.Request) {
	s.peerChange(w, r, false, s.changer.RemoveVoter)
}

// peerChange is change for the Raft configuration: read and check the body (400 on any node),
// forward to the leader from a follower, and on the leader make the change and answer the
// configuration.
func (s *Server) peerChange(w http.ResponseWriter, r *http.Request, needAddr bool, change func(PeerRequest) error) {
	body, ok := ReadBody(w, r)
	if !ok {
		return
	}
	var req PeerRequest
	if err := DecodeStrict(body, &req); err != nil {
		WriteError(w, err)
		return
	}
	if err := validatePeer(req, needAddr); err != nil {
		WriteError(w, err)
		return
	}
	if !s.changer.Leads() {
		s.forward(w, r, body)
		return
	}
	if err := change(req); err != nil {
		WriteError(w, err)
		return
	}
	if !req.DryRun {
		s.log.Info().Str("path", r.URL.Path).Str("peer_id", req.ID).Str("peer_raft_addr", req.RaftAddr).
			Bool("replace", req.Replace).Str("remote", r.RemoteAddr).Msg("raft configuration changed")
	}
	servers, err := s.changer.Configuration()
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, PeerChangeAnswer{LeaderID: s.node.ID(), Servers: servers})
}
