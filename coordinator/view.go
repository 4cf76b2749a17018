package coordinator

import (
	"sort"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// The ring view (GET /v1/ring, ring.view, the ring page) as this node sees it: the types are
// package admin's; what reads Raft, the replicated state and the leader's term is here.

func timingView(t fsm.LeaseTiming) admin.TimingView {
	return admin.TimingView{Coordinator: t.Coordinator, TTLMs: t.TTL.Milliseconds(), RenewalMs: t.Renewal.Milliseconds(),
		Drift: t.Drift, MarginMs: t.Margin.Milliseconds(), HolderBoundMs: t.HolderBound().Milliseconds()}
}

func controlsView(c *fsm.Controls) admin.ControlsView {
	v := admin.ControlsView{PausedImpl: []string{}}
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

// View returns this node's view of the cluster and the rings.
func (n *Node) View() admin.RingView {
	v := admin.RingView{CoordinatorID: n.cfg.NodeID, Coordinators: []admin.NodeView{}, Rings: []admin.RingStateView{}}
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
			v.LeaseTiming = &admin.LeaseTimingView{InForce: timingView(s.Timing.InForce), Longest: timingView(s.Timing.Longest)}
		}
		inConfig := map[string]bool{}
		for _, srv := range servers {
			id := string(srv.ID)
			inConfig[id] = true
			cv := admin.NodeView{ID: id, RaftAddr: string(srv.Address), State: admin.CoordinatorFollower, Voter: srv.Suffrage == raft.Voter}
			if id == v.LeaderID {
				cv.State = admin.CoordinatorLeader
			}
			if c := s.Coordinators[id]; c != nil {
				cv.RSocketAddr, cv.HTTPAddr, cv.FSMVersion = c.RSocketAddr, c.HTTPAddr, c.RunsVersion()
			}
			v.Coordinators = append(v.Coordinators, cv)
		}
		for id, c := range s.Coordinators {
			if !inConfig[id] {
				v.Coordinators = append(v.Coordinators, admin.NodeView{
					ID: id, RaftAddr: c.RaftAddr, RSocketAddr: c.RSocketAddr, HTTPAddr: c.HTTPAddr, State: admin.CoordinatorRemoved,
					FSMVersion: c.RunsVersion(),
				})
			}
		}
		for ringID, r := range s.Rings {
			rv := admin.RingStateView{Region: r.Key.Region, Cluster: r.Key.Cluster, Service: r.Key.Service, Generation: r.Generation,
				Controls: controlsView(r.Controls), Movement: movementView(r), Members: []admin.MemberView{}}
			for _, m := range r.SortedMembers() {
				mv := admin.MemberView{
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
		return admin.MemberDeparted
	case !m.Assigned():
		return admin.MemberJoining
	default:
		return admin.MemberActive
	}
}
