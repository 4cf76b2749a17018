package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Paths of the operator calls behind ctl status and ctl peers (ctl step-down: PathStepDown).
const (
	// PathStatus: GET, StatusAnswer. With ?local=1 only this node's NodeStatus (what a node asks
	// of its peers; no call goes further).
	PathStatus = "/v1/status"
	// PathPeers: GET, PeersAnswer: every server of the Raft configuration as it describes itself.
	PathPeers = "/v1/peers"
)

// peerTimeout bounds one status call to a peer: ctl peers shows a silent peer as unreachable
// rather than waiting for it.
const peerTimeout = 2 * time.Second

// MaxPeerAnswer bounds the answer of a peer that Cluster.AskPeer reads.
const MaxPeerAnswer = 1 << 20

// Cluster is what GET /v1/status and GET /v1/peers need of the coordinator: this node as it
// describes itself, the Raft configuration, the admin addresses the peers registered, and a way
// to ask one of them. It is defined here, where it is used, and implemented by the coordinator's
// adapter; this package asks the peers in parallel, reads their answers and says why one is
// missing.
type Cluster interface {
	// Status is this node as it describes itself.
	Status() NodeStatus
	// Servers is the Raft configuration as this node has it, and the leader Raft knows ("" for
	// none); lease.ErrUnavailable when Raft has not started or its configuration cannot be read.
	Servers() (leaderID string, servers []RaftServerView, err error)
	// PeerHTTPAddr is the admin address the coordinator id registered, or "".
	PeerHTTPAddr(id string) string
	// Behind says how this node is behind its own log (so that it knows no registration of a
	// peer yet), or "" when it has caught up.
	Behind() string
	// AskPeer makes the call GET path of the coordinator at the admin address addr, through the
	// client the coordinators use among themselves, and returns its answer as it came.
	AskPeer(ctx context.Context, addr, path string) (PeerAnswer, error)
}

// PeerAnswer is a coordinator's answer to a call of another, as it came.
type PeerAnswer struct {
	StatusCode int
	// Status is the status line's text, as the answer gave it ("200 OK").
	Status string
	// Body is the answer's body, at most MaxPeerAnswer bytes.
	Body []byte
}

// ServeCluster adds GET PathStatus and GET PathPeers, answered from c.
func (s *Server) ServeCluster(c Cluster) {
	s.cluster = c
	s.Handle(PathStatus, http.MethodGet, s.serveStatus)
	s.Handle(PathPeers, http.MethodGet, s.servePeers)
}

// serveStatus answers GET /v1/status: this node, and the leader as it describes itself.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	ans := StatusAnswer{Node: s.cluster.Status()}
	if r.URL.Query().Get("local") != "" {
		WriteJSON(w, http.StatusOK, ans.Node)
		return
	}
	switch addr := s.cluster.PeerHTTPAddr(ans.Node.LeaderID); {
	case ans.Node.LeaderID == "":
		ans.LeaderError = "no leader known (an election is under way, or quorum is lost)"
	case ans.Node.LeaderID == s.node.ID():
		ans.Leader = &ans.Node
	case addr == "":
		_, why := s.unregisteredPeer(ans.Node.LeaderID)
		ans.LeaderError = "leader " + ans.Node.LeaderID + " " + why
	default:
		st, err := s.peerStatus(r.Context(), addr)
		if err != nil {
			ans.LeaderError = fmt.Sprintf("leader %s at %s: %v", ans.Node.LeaderID, addr, err)
		} else {
			ans.Leader = &st
		}
	}
	WriteJSON(w, http.StatusOK, ans)
}

// servePeers answers GET /v1/peers: every server of the configuration, asked in parallel.
func (s *Server) servePeers(w http.ResponseWriter, r *http.Request) {
	leaderID, servers, err := s.cluster.Servers()
	if err != nil {
		WriteError(w, err)
		return
	}
	ans := PeersAnswer{CoordinatorID: s.node.ID(), LeaderID: leaderID, Peers: make([]PeerStatus, len(servers))}
	var wg sync.WaitGroup
	for i, srv := range servers {
		p := &ans.Peers[i]
		*p = PeerStatus{ID: srv.ID, RaftAddr: srv.RaftAddr, Voter: srv.Voter}
		if p.ID == s.node.ID() {
			st := s.cluster.Status()
			p.Status = &st
			continue
		}
		addr := s.cluster.PeerHTTPAddr(p.ID)
		if addr == "" {
			p.Problem, p.Error = s.unregisteredPeer(p.ID)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.peerStatus(r.Context(), addr)
			if err != nil {
				p.Problem, p.Error = PeerUnreachable, fmt.Sprintf("unreachable at %s: %v", addr, err)
				return
			}
			p.Status = &st
		}()
	}
	wg.Wait()
	WriteJSON(w, http.StatusOK, ans)
}

// unregisteredPeer explains a peer whose admin address this node does not know. For a few seconds
// after a restart that is this node's own state (it has not applied its log yet, so it knows no
// registration), not the peer's: it says so rather than blame every peer.
func (s *Server) unregisteredPeer(id string) (problem, reason string) {
	if behind := s.cluster.Behind(); behind != "" {
		return PeerUnknown, fmt.Sprintf("not known yet: %s (asked) has not applied its log since it started (%s), so it does not know %s's admin address yet; ask again in a moment",
			s.node.ID(), behind, id)
	}
	return PeerUnregistered, "has not registered its admin address (it registers once it runs, is in the raft configuration and reaches the leader)"
}

// peerStatus asks the coordinator at addr for its own status (GET /v1/status?local=1).
func (s *Server) peerStatus(ctx context.Context, addr string) (NodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	a, err := s.cluster.AskPeer(ctx, addr, PathStatus+"?local=1")
	if err != nil {
		return NodeStatus{}, err
	}
	if a.StatusCode != http.StatusOK {
		return NodeStatus{}, fmt.Errorf("answered %s: %s", a.Status, strings.TrimSpace(string(a.Body)))
	}
	var st NodeStatus
	if err := json.Unmarshal(a.Body, &st); err != nil {
		return NodeStatus{}, fmt.Errorf("answered something that is not a node status: %w", err)
	}
	return st, nil
}
