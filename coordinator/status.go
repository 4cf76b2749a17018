package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Paths of the operator calls behind ctl status and ctl peers (ctl step-down: admin.PathStepDown).
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

// stepDownWait bounds how long the old leader waits to see who took over, after Raft confirmed
// the transfer, before it answers without naming the new leader.
const stepDownWait = 10 * time.Second

// localStatus describes this node.
func (n *Node) localStatus() admin.NodeStatus {
	st := admin.NodeStatus{ID: n.cfg.NodeID, FSMVersion: n.fsm.Version(), State: "not started"}
	rd := n.readiness()
	st.Ready, st.Reason, st.LeaderID, st.CommitIndex, st.AppliedIndex = rd.Ready, rd.Reason, rd.LeaderID, rd.CommitIndex, rd.AppliedIndex
	if n.raft == nil {
		return st
	}
	stats := n.raft.Stats()
	st.State = strings.ToLower(n.raft.State().String())
	st.Term = n.raft.CurrentTerm()
	st.LastContact = stats["last_contact"]
	st.LastLogIndex = n.raft.LastIndex()
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if c := s.Coordinators[n.cfg.NodeID]; c != nil {
			st.RaftAddr, st.RSocketAddr, st.HTTPAddr = c.RaftAddr, c.RSocketAddr, c.HTTPAddr
		}
		st.Rings, st.EpochFloor, st.Settling = len(s.Rings), s.EpochFloor, s.Settling
		for _, r := range s.Rings {
			st.Members += len(r.Members)
			st.Cordoned += len(r.Cordoned)
		}
	})
	return st
}

// serveStatus answers GET /v1/status: this node, and the leader as it describes itself.
func (n *Node) serveStatus(w http.ResponseWriter, r *http.Request) {
	ans := admin.StatusAnswer{Node: n.localStatus()}
	if r.URL.Query().Get("local") != "" {
		admin.WriteJSON(w, http.StatusOK, ans.Node)
		return
	}
	switch addr := n.peerHTTPAddr(ans.Node.LeaderID); {
	case ans.Node.LeaderID == "":
		ans.LeaderError = "no leader known (an election is under way, or quorum is lost)"
	case ans.Node.LeaderID == n.cfg.NodeID:
		ans.Leader = &ans.Node
	case addr == "":
		_, why := n.unregisteredPeer(ans.Node.LeaderID)
		ans.LeaderError = "leader " + ans.Node.LeaderID + " " + why
	default:
		st, err := n.peerStatus(r.Context(), addr)
		if err != nil {
			ans.LeaderError = fmt.Sprintf("leader %s at %s: %v", ans.Node.LeaderID, addr, err)
		} else {
			ans.Leader = &st
		}
	}
	admin.WriteJSON(w, http.StatusOK, ans)
}

// servePeers answers GET /v1/peers: every server of the configuration, asked in parallel.
func (n *Node) servePeers(w http.ResponseWriter, r *http.Request) {
	ans := admin.PeersAnswer{CoordinatorID: n.cfg.NodeID, Peers: []admin.PeerStatus{}}
	if n.raft == nil {
		admin.WriteError(w, fmt.Errorf("%w: raft not started", lease.ErrUnavailable))
		return
	}
	_, lid := n.raft.LeaderWithID()
	ans.LeaderID = string(lid)
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		admin.WriteError(w, fmt.Errorf("%w: read the raft configuration: %w", lease.ErrUnavailable, err))
		return
	}
	servers := f.Configuration().Servers
	ans.Peers = make([]admin.PeerStatus, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		p := &ans.Peers[i]
		*p = admin.PeerStatus{ID: string(srv.ID), RaftAddr: string(srv.Address), Voter: srv.Suffrage == raft.Voter}
		if p.ID == n.cfg.NodeID {
			st := n.localStatus()
			p.Status = &st
			continue
		}
		addr := n.peerHTTPAddr(p.ID)
		if addr == "" {
			p.Problem, p.Error = n.unregisteredPeer(p.ID)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := n.peerStatus(r.Context(), addr)
			if err != nil {
				p.Problem, p.Error = admin.PeerUnreachable, fmt.Sprintf("unreachable at %s: %v", addr, err)
				return
			}
			p.Status = &st
		}()
	}
	wg.Wait()
	admin.WriteJSON(w, http.StatusOK, ans)
}

// unregisteredPeer explains a peer whose admin address this node does not know. For a few seconds
// after a restart that is this node's own state (it has not applied its log yet, so it knows no
// registration), not the peer's: it says so rather than blame every peer.
func (n *Node) unregisteredPeer(id string) (problem, reason string) {
	if behind := n.notYetApplied(); behind != "" {
		return admin.PeerUnknown, fmt.Sprintf("not known yet: %s (asked) has not applied its log since it started (%s), so it does not know %s's admin address yet; ask again in a moment",
			n.cfg.NodeID, behind, id)
	}
	return admin.PeerUnregistered, "has not registered its admin address (it registers once it runs, is in the raft configuration and reaches the leader)"
}

// notYetApplied says how this node is behind its own log, or "" when it has caught up.
func (n *Node) notYetApplied() string {
	if n.raft.State() != raft.Leader && n.raft.Stats()["last_contact"] == "never" {
		return "no contact with a leader yet"
	}
	if applied, last := n.raft.AppliedIndex(), n.raft.LastIndex(); applied < last {
		return fmt.Sprintf("applied index %d of %d", applied, last)
	}
	if !registered(n, n.cfg.NodeID) {
		return "its own registration is not applied yet"
	}
	return ""
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

// peerStatus asks the coordinator at addr for its own status (GET /v1/status?local=1). It goes
// through the same client as forwarded admin calls (peerHTTPClient), so it speaks whatever the
// coordinators speak among themselves.
func (n *Node) peerStatus(ctx context.Context, addr string) (admin.NodeStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.peerURL(addr, PathStatus+"?local=1"), nil)
	if err != nil {
		return admin.NodeStatus{}, err
	}
	resp, err := n.peerHTTPClient(0).Do(req)
	if err != nil {
		return admin.NodeStatus{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return admin.NodeStatus{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return admin.NodeStatus{}, fmt.Errorf("answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var st admin.NodeStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return admin.NodeStatus{}, fmt.Errorf("answered something that is not a node status: %w", err)
	}
	return st, nil
}

// stepDown hands the lead over (admin.Changer's StepDown, POST admin.PathStepDown) with Raft's
// leadership transfer, to the named voter or to the one Raft picks, and says who took over once it
// sees it; admin.ErrNotLeading when this node is not Raft's leader, and admin forwards. Its leader
// term ends like on any lost election: workers follow the new leader, whose renewals keep every
// lease (invariant 4).
func (n *Node) stepDown(ctx context.Context, to string) (admin.StepDownAnswer, error) {
	if n.raft == nil || n.raft.State() != raft.Leader {
		return admin.StepDownAnswer{}, admin.ErrNotLeading
	}
	start := n.clock.Now()
	var future raft.Future
	if to == "" {
		future = n.raft.LeadershipTransfer()
	} else {
		addr, ok := n.voterAddr(to)
		switch {
		case to == n.cfg.NodeID:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %s already leads; name another voter, or none", lease.ErrBadRequest, to)
		case !ok:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %q is not a voter of the raft configuration", lease.ErrBadRequest, to)
		}
		future = n.raft.LeadershipTransferToServer(raft.ServerID(to), addr)
	}
	if err := n.awaitFuture(future); err != nil {
		return admin.StepDownAnswer{}, fmt.Errorf("%w: leadership transfer from %s failed: %w", lease.ErrUnavailable, n.cfg.NodeID, err)
	}
	ans := admin.StepDownAnswer{PreviousLeader: n.cfg.NodeID}
	deadline := time.Now().Add(stepDownWait)
	for {
		_, lid := n.raft.LeaderWithID()
		if lid != "" && string(lid) != n.cfg.NodeID {
			ans.LeaderID = string(lid)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-n.stop:
			return admin.StepDownAnswer{}, fmt.Errorf("%w: %s is shutting down", lease.ErrUnavailable, n.cfg.NodeID)
		}
	}
	ans.Term, ans.TookMs = n.raft.CurrentTerm(), n.clock.Now().Sub(start).Milliseconds()
	return ans, nil
}

// voterAddr is the Raft address of the voter id of the configuration.
func (n *Node) voterAddr(id string) (raft.ServerAddress, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id && s.Suffrage == raft.Voter {
			return s.Address, true
		}
	}
	return "", false
}
