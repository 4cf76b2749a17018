package coordinator

import (
	"sort"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// RingView is the answer of GET /v1/ring and of the ring.view route: this node's view of the
// cluster and of every ring.
type RingView struct {
	CoordinatorID string     `json:"coordinator_id"`
	LeaderID      string     `json:"leader_id"`
	RaftTerm      uint64     `json:"raft_term"`
	Coordinators  []NodeView `json:"coordinators"`
	// LeaseTiming is the lease timing committed to the replicated state; nil until a leader
	// could commit one (every coordinator runs FSM version 2).
	LeaseTiming *LeaseTimingView `json:"lease_timing,omitempty"`
	Rings       []RingStateView  `json:"rings"`
}

// LeaseTimingView is the committed lease timing: the one leases are sent with now, and the
// longest one a lease still possibly in use may have been sent with, which bounds what a new
// leader waits for before it moves a range.
type LeaseTimingView struct {
	InForce TimingView `json:"in_force"`
	Longest TimingView `json:"longest"`
}

// TimingView is one committed timing, durations in milliseconds.
type TimingView struct {
	Coordinator   string  `json:"coordinator"`
	TTLMs         int64   `json:"ttl_ms"`
	RenewalMs     int64   `json:"renewal_ms"`
	Drift         float64 `json:"drift"`
	MarginMs      int64   `json:"margin_ms"`
	HolderBoundMs int64   `json:"holder_bound_ms"`
}

func timingView(t fsm.LeaseTiming) TimingView {
	return TimingView{Coordinator: t.Coordinator, TTLMs: t.TTL.Milliseconds(), RenewalMs: t.Renewal.Milliseconds(),
		Drift: t.Drift, MarginMs: t.Margin.Milliseconds(), HolderBoundMs: t.HolderBound().Milliseconds()}
}

// Ring returns the view of the ring named key, if the view has it.
func (v RingView) Ring(key lease.RingKey) (RingStateView, bool) {
	for _, r := range v.Rings {
		if r.Region == key.Region && r.Cluster == key.Cluster && r.Service == key.Service {
			return r, true
		}
	}
	return RingStateView{}, false
}

// NodeView is one coordinator: a voter of the Raft configuration or a registered node.
type NodeView struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	RSocketAddr string `json:"rsocket_addr"`
	HTTPAddr    string `json:"http_addr"`
	// State is "leader", "follower" (in the configuration, not the leader) or "removed"
	// (registered but no longer in the configuration).
	State string `json:"state"`
	Voter bool   `json:"voter"`
	// FSMVersion is the FSM version the node registered (0: not registered yet). The leader
	// proposes a command type only once every node of the configuration runs a version that
	// knows it.
	FSMVersion int `json:"fsm_version"`
}

// RingStateView is one ring.
type RingStateView struct {
	Region     string `json:"region"`
	Cluster    string `json:"cluster"`
	Service    string `json:"service"`
	Generation uint64 `json:"generation"`
	// Controls are the ring's flow controls (pauses, rate limit), replicated.
	Controls ControlsView `json:"controls"`
	// Movement is the ring's movement mode, replicated.
	Movement MovementView `json:"movement"`
	Members  []MemberView `json:"members"`
	// Backlog is what the members' reports say of the ring's backlog; only the leader has it.
	Backlog *BacklogView `json:"backlog,omitempty"`
}

// ControlsView is a ring's flow controls as the operator set them.
type ControlsView struct {
	Paused     bool     `json:"paused"`
	PausedImpl []string `json:"paused_impl"`
	Reason     string   `json:"reason"`
	// RatePerS is the ring's execution rate limit, split among the members in proportion to the
	// tokens assigned to them; nil: none.
	RatePerS *float64 `json:"rate_per_s"`
	// SinceMs is when the controls last changed (the leader's wall clock, Unix ms); 0: never set.
	SinceMs int64 `json:"since_ms"`
}

func controlsView(c *fsm.Controls) ControlsView {
	v := ControlsView{PausedImpl: []string{}}
	if c == nil {
		return v
	}
	v.Paused, v.Reason, v.SinceMs = c.Paused, c.Reason, c.SinceMs
	v.PausedImpl = append(v.PausedImpl, c.PausedImpl...)
	if c.RatePerS > 0 {
		rate := c.RatePerS
		v.RatePerS = &rate
	}
	return v
}

// MemberView is one member (worker incarnation) of a ring, in join order.
type MemberView struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	// NodeIndex is -1 before the first assignment.
	NodeIndex int    `json:"node_index"`
	Epoch     uint64 `json:"epoch"`
	// Ranges are the current assignment's ranges, tokens as decimal strings.
	Ranges []lease.WireRange `json:"ranges"`
	// LeaseExpiresMs is the leader's wall-clock estimate (Unix ms) of when the last element of the
	// current epoch it sent stops being usable: send time + TTL. Informational, never a safety
	// input; 0 on followers and when this leader has sent nothing of that epoch.
	LeaseExpiresMs int64 `json:"lease_expires_ms"`
	// State is "active" (assigned), "joining" (active, nothing assigned yet) or "departed" (down,
	// superseded or cut off; it stays until what it holds is released or expired).
	State string `json:"state"`
	// Cordoned: an operator cordoned the worker id (ctl cordon): it gets no range and is not
	// Node-0, and keeps its connection and its reports.
	Cordoned bool `json:"cordoned,omitempty"`
	// Report is the member's last ring.report as the leader keeps it; only the leader has it.
	Report *MemberReport `json:"report,omitempty"`
	// Controls tells whether the member's connection announced the controls feature: false
	// flags a worker that cannot obey an impl pause or a rate limit (and gets no renewal while
	// the ring is paused whole). Only the leader knows, for members connected to it; absent
	// otherwise.
	Controls *bool `json:"controls,omitempty"`
}

// Member states of MemberView.
const (
	MemberActive   = "active"
	MemberJoining  = "joining"
	MemberDeparted = "departed"
)

// Coordinator states of NodeView.
const (
	CoordinatorLeader   = "leader"
	CoordinatorFollower = "follower"
	CoordinatorRemoved  = "removed"
)

// View returns this node's view of the cluster and the rings.
func (n *Node) View() RingView {
	v := RingView{CoordinatorID: n.cfg.NodeID, Coordinators: []NodeView{}, Rings: []RingStateView{}}
	if n.raft == nil {
		return v
	}
	_, leader := n.raft.LeaderWithID()
	v.LeaderID = string(leader)
	v.RaftTerm = n.raft.CurrentTerm()
	var servers []raft.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	term := n.currentTerm()
	var obeys map[memberID]bool
	if term != nil {
		obeys = n.conns.obeysControls()
	}
	ttl := n.cfg.Timing.TTL
	type expiry struct {
		ring, member int
		id           memberID
		epoch        uint64
	}
	var expiries []expiry

	n.fsm.View(func(s *fsm.State, _ uint64) {
		if s.Timing != nil {
			v.LeaseTiming = &LeaseTimingView{InForce: timingView(s.Timing.InForce), Longest: timingView(s.Timing.Longest)}
		}
		inConfig := map[string]bool{}
		for _, srv := range servers {
			id := string(srv.ID)
			inConfig[id] = true
			cv := NodeView{ID: id, RaftAddr: string(srv.Address), State: CoordinatorFollower, Voter: srv.Suffrage == raft.Voter}
			if id == v.LeaderID {
				cv.State = CoordinatorLeader
			}
			if c := s.Coordinators[id]; c != nil {
				cv.RSocketAddr, cv.HTTPAddr, cv.FSMVersion = c.RSocketAddr, c.HTTPAddr, c.RunsVersion()
			}
			v.Coordinators = append(v.Coordinators, cv)
		}
		for id, c := range s.Coordinators {
			if !inConfig[id] {
				v.Coordinators = append(v.Coordinators, NodeView{
					ID: id, RaftAddr: c.RaftAddr, RSocketAddr: c.RSocketAddr, HTTPAddr: c.HTTPAddr, State: CoordinatorRemoved,
					FSMVersion: c.RunsVersion(),
				})
			}
		}
		for ringID, r := range s.Rings {
			rv := RingStateView{Region: r.Key.Region, Cluster: r.Key.Cluster, Service: r.Key.Service, Generation: r.Generation,
				Controls: controlsView(r.Controls), Movement: movementView(r), Members: []MemberView{}}
			for _, m := range r.SortedMembers() {
				mv := MemberView{
					WorkerID: m.WorkerID, Incarnation: m.Incarnation, NodeIndex: m.NodeIndex, Epoch: m.Epoch,
					Ranges: lease.EncodeRanges(m.Ranges), State: memberState(m), Cordoned: r.IsCordoned(m.WorkerID),
				}
				if o, ok := obeys[memberID{Ring: ringID, WorkerID: m.WorkerID, Incarnation: m.Incarnation}]; ok {
					mv.Controls = &o
				}
				if m.Assigned() {
					expiries = append(expiries, expiry{ring: len(v.Rings), member: len(rv.Members),
						id: memberID{Ring: ringID, WorkerID: m.WorkerID, Incarnation: m.Incarnation}, epoch: m.Epoch})
				}
				rv.Members = append(rv.Members, mv)
			}
			v.Rings = append(v.Rings, rv)
		}
	})
	// The send log is read outside fsm.View: a stream takes the log's lock before the state's.
	if term != nil {
		for _, e := range expiries {
			if at, ok := term.sends.last(e.id, e.epoch); ok {
				v.Rings[e.ring].Members[e.member].LeaseExpiresMs = at.Add(ttl).UnixMilli()
			}
		}
		term.reports.annotate(&v, n.clock.Now())
	}
	sort.Slice(v.Coordinators, func(i, j int) bool { return v.Coordinators[i].ID < v.Coordinators[j].ID })
	sort.Slice(v.Rings, func(i, j int) bool {
		a, b := v.Rings[i], v.Rings[j]
		if a.Region != b.Region {
			return a.Region < b.Region
		}
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		return a.Service < b.Service
	})
	return v
}

func memberState(m *fsm.Member) string {
	switch {
	case !m.Active:
		return MemberDeparted
	case !m.Assigned():
		return MemberJoining
	default:
		return MemberActive
	}
}
