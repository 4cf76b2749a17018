package coordinator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// httpHandler serves the admin API: package admin's server, every answer of which is admin's,
// over this node as adminNode shows it (the view, the changes, status and peers, the
// registrations, the admin token for the profiles) and its Prometheus registry.
func (n *Node) httpHandler() http.Handler {
	a := adminNode{n}
	s := admin.New(a, n.log)
	s.ServeChanges(a)
	s.ServeCluster(a)
	s.ServeRegistrations(a)
	s.ServeMetrics(promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}))
	s.ServeProfiles(n.cfg.Profiling, a)
	return s
}

// adminNode is the node as package admin sees it: admin.Node; admin.Changer for the calls that
// change something; admin.Cluster for status and peers; admin.Registrar for the registration of
// a coordinator's addresses; admin.AdminGate for the profiles. It is an adapter rather than
// methods of Node, so that what the admin API may ask of a coordinator is this list and no more:
// it reads Raft, the replicated state and the leader's term for admin, and every answer (JSON,
// status code, error text) is admin's.
type adminNode struct{ n *Node }

func (a adminNode) ID() string { return a.n.cfg.NodeID }

func (a adminNode) View() admin.RingView { return a.n.View() }

func (a adminNode) Now() time.Time { return a.n.clock.Now() }

func (a adminNode) BacklogSamples() map[string][]admin.BacklogSample {
	if t := a.n.currentTerm(); t != nil {
		return t.backlog.series()
	}
	return nil
}

// Readiness is what GET /readyz and GET /v1/status say of this node's readiness.
func (a adminNode) Readiness() admin.Readiness {
	n := a.n
	rd := admin.Readiness{}
	if n.raft == nil {
		rd.Reason = "not started"
		return rd
	}
	_, leader := n.raft.LeaderWithID()
	rd.LeaderID = string(leader)
	rd.CommitIndex = n.raft.CommitIndex()
	rd.AppliedIndex = n.raft.AppliedIndex()
	switch halted := n.fsm.Halted(); {
	case halted != nil:
		rd.Reason = fmt.Sprintf("the replicated state stopped applying (FSM version %d): %v", n.fsm.Version(), halted)
	case leader == "":
		rd.Reason = "no leader known"
	case rd.AppliedIndex < rd.CommitIndex:
		rd.Reason = fmt.Sprintf("applied index %d behind commit index %d", rd.AppliedIndex, rd.CommitIndex)
	default:
		rd.Ready = true
	}
	return rd
}

func (a adminNode) Authorize(w http.ResponseWriter, r *http.Request) bool {
	return a.n.authorizeHTTP(w, r)
}

func (a adminNode) Leads() bool {
	t := a.n.currentTerm()
	return t != nil && t.isReady()
}

func (a adminNode) Commit(c admin.Change) (admin.Committed, error) { return a.n.commitChange(c) }

func (a adminNode) Forward(r *http.Request, body []byte) (admin.Forwarded, error) {
	return a.n.forward(r, body)
}

func (a adminNode) AddVoter(p admin.PeerRequest) error { return a.n.addVoter(p) }

func (a adminNode) RemoveVoter(p admin.PeerRequest) error { return a.n.removeVoter(p) }

func (a adminNode) Configuration() ([]admin.RaftServerView, error) { return a.n.configuration() }

func (a adminNode) StepDown(ctx context.Context, to string) (admin.StepDownAnswer, error) {
	return a.n.stepDown(ctx, to)
}

// Status describes this node (admin.Cluster's).
func (a adminNode) Status() admin.NodeStatus {
	n := a.n
	st := admin.NodeStatus{ID: n.cfg.NodeID, FSMVersion: n.fsm.Version(), State: "not started"}
	rd := a.Readiness()
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

func (a adminNode) Servers() (string, []admin.RaftServerView, error) {
	if a.n.raft == nil {
		return "", nil, fmt.Errorf("%w: raft not started", lease.ErrUnavailable)
	}
	_, lid := a.n.raft.LeaderWithID()
	servers, err := a.n.configuration()
	return string(lid), servers, err
}

func (a adminNode) PeerHTTPAddr(id string) string { return a.n.peerHTTPAddr(id) }

// Behind says how this node is behind its own log, or "" when it has caught up.
func (a adminNode) Behind() string {
	n := a.n
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

// AskPeer goes through the same client as forwarded admin calls (peerHTTPClient), so it speaks
// whatever the coordinators speak among themselves.
func (a adminNode) AskPeer(ctx context.Context, addr, path string) (admin.PeerAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.n.peerURL(addr, path), nil)
	if err != nil {
		return admin.PeerAnswer{}, err
	}
	resp, err := a.n.peerHTTPClient(0).Do(req)
	if err != nil {
		return admin.PeerAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, admin.MaxPeerAnswer))
	if err != nil {
		return admin.PeerAnswer{}, err
	}
	return admin.PeerAnswer{StatusCode: resp.StatusCode, Status: resp.Status, Body: body}, nil
}

func (a adminNode) InConfiguration(id string) bool { return a.n.inConfiguration(id) }

func (a adminNode) Registered(reg admin.Registration) bool {
	c := fsm.Coordinator(reg)
	unchanged := false
	a.n.fsm.View(func(s *fsm.State, _ uint64) {
		have := s.Coordinators[c.ID]
		unchanged = have != nil && *have == c
	})
	return unchanged
}

func (a adminNode) Register(reg admin.Registration) error {
	return a.n.apply(&fsm.RegisterCoordinator{Coordinator: fsm.Coordinator(reg)})
}

// RefuseAdmin is the edge's check of an admin token, counted like the edge's refusals.
func (a adminNode) RefuseAdmin(authorization string) (string, bool) {
	refusal := a.n.auth.Admin(authorization)
	if refusal == nil {
		return "", false
	}
	a.n.metrics.refused(refusedAdmin)
	return refusal.Message, true
}
