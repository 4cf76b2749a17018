package fsm

import (
	"slices"
	"sort"
	"time"

	"github.com/retryring/retryring/lease"
)

// State is the whole replicated state.
type State struct {
	Coordinators map[string]*Coordinator `json:"coordinators"`
	Rings        map[string]*Ring        `json:"rings"`
	// Timing is the lease timing leaders committed; nil until the first one did (a cluster
	// that never ran FSM version 2 on every server).
	Timing *TimingState `json:"timing,omitempty"`
	// EpochFloor is the highest epoch floor committed (EpochFloor command): every ring's
	// LastEpoch is at least this, a ring created later starts from it. 0 until a leader of FSM
	// version 4 committed one.
	EpochFloor uint64 `json:"epoch_floor,omitempty"`
	// Settling: the cluster was bootstrapped or recovered and its leader has not yet waited out
	// every lease that may be alive from before; no assignment is made meanwhile.
	Settling bool `json:"settling,omitempty"`
}

// TimingState is the lease timing of the cluster: one for every ring, since it is a setting of
// the coordinators, not of a ring.
type TimingState struct {
	// InForce is the timing of the leader that committed last: the one leases are sent with now.
	InForce LeaseTiming `json:"in_force"`
	// Longest is the timing with the longest holder bound that a lease still possibly in use may
	// have been sent with: every committed timing raises it, a RetireTiming lowers it once the
	// leases sent under it have ended. A new leader treats every lease of an earlier leader as
	// possibly alive for the leader lease plus Longest's holder bound.
	Longest LeaseTiming `json:"longest"`
}

// LeaseTiming is one leader's lease timing (lease.Timing) and the coordinator that ran it.
// Durations are in nanoseconds, so that the holder bound computed from it is exactly the one the
// leader used.
type LeaseTiming struct {
	Coordinator string        `json:"coordinator"`
	TTL         time.Duration `json:"ttl_ns"`
	Renewal     time.Duration `json:"renewal_ns"`
	Drift       float64       `json:"drift"`
	Margin      time.Duration `json:"margin_ns"`
}

// NewLeaseTiming records t (defaults filled) as run by coordinator.
func NewLeaseTiming(coordinator string, t lease.Timing) LeaseTiming {
	t = t.WithDefaults()
	return LeaseTiming{Coordinator: coordinator, TTL: t.TTL, Renewal: t.Renewal, Drift: t.Drift, Margin: t.Margin}
}

// Lease returns the timing as lease.Timing.
func (t LeaseTiming) Lease() lease.Timing {
	return lease.Timing{TTL: t.TTL, Renewal: t.Renewal, Drift: t.Drift, Margin: t.Margin}
}

// HolderBound is lease.Timing.HolderBound of the timing: TTL×(1+ρ) + margin.
func (t LeaseTiming) HolderBound() time.Duration { return t.Lease().HolderBound() }

// NewState returns an empty state.
func NewState() *State {
	return &State{Coordinators: map[string]*Coordinator{}, Rings: map[string]*Ring{}}
}

// Coordinator is one coordinator node's addresses as it registered them.
type Coordinator struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	RSocketAddr string `json:"rsocket_addr"`
	HTTPAddr    string `json:"http_addr"`
	// FSMVersion is the FSM version the coordinator runs (Version of its build); 0 from a
	// coordinator that predates the field, which runs version 1.
	FSMVersion int `json:"fsm_version,omitempty"`
}

// RunsVersion is the FSM version the coordinator registered.
func (c *Coordinator) RunsVersion() int { return max(c.FSMVersion, 1) }

// Ring is one ring: the workers retrying one service in one region and cluster.
type Ring struct {
	Key lease.RingKey `json:"key"`
	// Generation changes on every membership change.
	Generation uint64 `json:"generation"`
	// LastEpoch is the highest epoch assigned in this ring; epochs only grow.
	LastEpoch uint64 `json:"last_epoch"`
	// NextSeq orders joins: the oldest active member is the Node-0 candidate.
	NextSeq uint64             `json:"next_seq"`
	Members map[string]*Member `json:"members"`
	// Controls are the ring's flow controls; nil when nothing is paused or limited.
	Controls *Controls `json:"controls,omitempty"`
	// Cordoned are the worker ids an operator cordoned (Cordon), sorted: they get no range and
	// not Node-0. Each has a member in the ring; nil when none is cordoned.
	Cordoned []string `json:"cordoned,omitempty"`
	// Movement is the ring's minimal-movement setting (SetMovement); nil in the default
	// contiguous mode.
	Movement *Movement `json:"movement,omitempty"`
}

// Controls are a ring's flow controls as the operator set them (product.md, "Operating
// retries"). Leases carry them to the workers that announced the controls feature.
type Controls struct {
	// Paused: the ring's workers start no traversal and no execution.
	Paused bool `json:"paused,omitempty"`
	// PausedImpl are the stacksaga impl types whose executions are paused, sorted.
	PausedImpl []string `json:"paused_impl,omitempty"`
	// Reason is the operator's note of the last pause that gave one.
	Reason string `json:"reason,omitempty"`
	// RatePerS is the ring's execution rate limit; 0 means none. The leader splits it among the
	// members, in proportion to tokens among those with work (coordinator/share.go): that split
	// is its own view of the reports, not state.
	RatePerS float64 `json:"rate_per_s,omitempty"`
	// SinceMs is when the controls last changed: the proposing leader's wall clock, Unix ms, for
	// people only.
	SinceMs int64 `json:"since_ms,omitempty"`
}

func (c *Controls) clone() *Controls {
	if c == nil {
		return nil
	}
	out := *c
	out.PausedImpl = append([]string(nil), c.PausedImpl...)
	if len(out.PausedImpl) == 0 {
		out.PausedImpl = nil
	}
	return &out
}

// Member is one incarnation of a worker in a ring.
type Member struct {
	WorkerID    string `json:"worker_id"`
	Incarnation string `json:"incarnation"`
	JoinSeq     uint64 `json:"join_seq"`
	// ActiveSince is the ring generation at which the member last became active (joined or
	// reconnected). An Expire decided on an older generation does not apply to it: the leader may
	// have renewed its leases since.
	ActiveSince uint64 `json:"active_since"`
	// Active is false once the member is down (connection lost, silent) or superseded by a newer
	// incarnation: it gets no new assignment and stays only while it holds something.
	Active bool `json:"active"`
	// Epoch, NodeIndex, NodeCount and Ranges are the current assignment, the one its leases carry.
	// Epoch 0 means nothing was assigned yet.
	Epoch     uint64       `json:"epoch"`
	NodeIndex int          `json:"node_index"`
	NodeCount int          `json:"node_count"`
	Ranges    lease.Ranges `json:"ranges"`
	// Holds are what older assignments gave and the current one does not: still possibly in use.
	Holds []Hold `json:"holds,omitempty"`
}

// Hold is the part of an older assignment that the member may still be using.
type Hold struct {
	Epoch  uint64       `json:"epoch"`
	Ranges lease.Ranges `json:"ranges,omitempty"`
	Node0  bool         `json:"node0,omitempty"`
}

// MemberKey is the map key of a member: worker id and incarnation.
func MemberKey(workerID, incarnation string) string { return workerID + "\x00" + incarnation }

// RingID is the map key of a ring.
func RingID(k lease.RingKey) string { return k.Region + "\x00" + k.Cluster + "\x00" + k.Service }

// Key returns the member's map key.
func (m *Member) Key() string { return MemberKey(m.WorkerID, m.Incarnation) }

// Assigned reports whether the member has received an assignment.
func (m *Member) Assigned() bool { return m.Epoch > 0 }

// IsNode0 reports whether the current assignment makes the member Node-0.
func (m *Member) IsNode0() bool { return m.Assigned() && m.NodeIndex == 0 }

// Held returns every token the member may be using: its current ranges and its holds.
func (m *Member) Held() lease.Ranges {
	held := m.Ranges
	for _, h := range m.Holds {
		held = held.Union(h.Ranges)
	}
	return held
}

// HoldsNode0 reports whether the member may be acting as Node-0.
func (m *Member) HoldsNode0() bool {
	if m.IsNode0() {
		return true
	}
	for _, h := range m.Holds {
		if h.Node0 {
			return true
		}
	}
	return false
}

// Holding reports whether the member may still be using anything.
func (m *Member) Holding() bool { return !m.Held().Empty() || m.HoldsNode0() }

// Ring returns the ring of k, or nil.
func (s *State) Ring(k lease.RingKey) *Ring { return s.Rings[RingID(k)] }

// ActiveMembers returns the active members in join order.
func (r *Ring) ActiveMembers() []*Member {
	var out []*Member
	for _, m := range r.Members {
		if m.Active {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JoinSeq < out[j].JoinSeq })
	return out
}

// SortedMembers returns every member (active or still holding) in join order.
func (r *Ring) SortedMembers() []*Member {
	out := make([]*Member, 0, len(r.Members))
	for _, m := range r.Members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].JoinSeq != out[j].JoinSeq {
			return out[i].JoinSeq < out[j].JoinSeq
		}
		return out[i].Key() < out[j].Key()
	})
	return out
}

// ActiveByWorker returns the active incarnation of workerID, if any.
func (r *Ring) ActiveByWorker(workerID string) *Member {
	for _, m := range r.Members {
		if m.Active && m.WorkerID == workerID {
			return m
		}
	}
	return nil
}

// HeldByOthers returns the tokens held by every member except the one with key except.
func (r *Ring) HeldByOthers(except string) lease.Ranges {
	var held lease.Ranges
	for k, m := range r.Members {
		if k != except {
			held = held.Union(m.Held())
		}
	}
	return held
}

// Node0HeldByOthers reports whether a member other than except may be acting as Node-0.
func (r *Ring) Node0HeldByOthers(except string) bool {
	for k, m := range r.Members {
		if k != except && m.HoldsNode0() {
			return true
		}
	}
	return false
}

// otherIncarnationHolding reports whether an incarnation of workerID other than the member with key
// except may still be using something. Until it ends, the member gets nothing: two processes with
// one worker id never both hold ranges (nor one ranges and the other Node-0).
func (r *Ring) otherIncarnationHolding(workerID, except string) bool {
	for k, m := range r.Members {
		if k != except && m.WorkerID == workerID && m.Holding() {
			return true
		}
	}
	return false
}

// Settled reports whether every active member that is not cordoned has exactly its equal share,
// every cordoned one nothing (no range, not Node-0, after them in node order), nobody holds
// anything else and nothing departed is still holding: the state of invariant 1.
func (r *Ring) Settled() bool {
	for _, m := range r.Members {
		if !m.Active || len(m.Holds) > 0 {
			return false
		}
	}
	if r.Movement != nil {
		return r.settledMinimal()
	}
	eligible := r.EligibleMembers()
	if len(eligible) > 0 {
		split := lease.Split(len(eligible))
		for i, m := range eligible {
			if m.NodeIndex != i || !m.Ranges.Equal(lease.Ranges{split[i]}) {
				return false
			}
		}
	}
	for _, m := range r.ActiveMembers() {
		if r.IsCordoned(m.WorkerID) && (!m.Assigned() || m.NodeIndex < max(len(eligible), 1) || !m.Ranges.Empty()) {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	out := NewState()
	for k, c := range s.Coordinators {
		cc := *c
		out.Coordinators[k] = &cc
	}
	for k, r := range s.Rings {
		out.Rings[k] = r.Clone()
	}
	if s.Timing != nil {
		t := *s.Timing
		out.Timing = &t
	}
	out.EpochFloor, out.Settling = s.EpochFloor, s.Settling
	return out
}

// formatVersion is the FSM version a snapshot of s needs: 1 while the state holds only what
// version 1 knows, so that a node of version 1 can still restore it during a rolling upgrade; 2
// once it holds a lease timing or controls, which a version 1 node would drop without a word; 4
// once it holds an epoch floor (without which a version 3 node would hand out epochs below it) or a
// ring has a cordoned worker (which a node of version 3 or older would drop, and then give that
// worker ranges again); 6 once a ring is in the minimal movement mode (which a node of version 5
// would drop, and plan that ring contiguously).
func (s *State) formatVersion() int {
	for _, r := range s.Rings {
		if r.Movement != nil {
			return 6
		}
	}
	if s.EpochFloor > 0 || s.Settling {
		return 4
	}
	format := 1
	if s.Timing != nil {
		format = 2
	}
	for _, r := range s.Rings {
		if len(r.Cordoned) > 0 {
			return 4
		}
		if r.Controls != nil {
			format = 2
		}
	}
	return format
}

// Clone returns a deep copy of the ring.
func (r *Ring) Clone() *Ring {
	out := *r
	out.Controls = r.Controls.clone()
	out.Cordoned = slices.Clone(r.Cordoned)
	out.Movement = r.Movement.clone()
	out.Members = make(map[string]*Member, len(r.Members))
	for k, m := range r.Members {
		mm := *m
		mm.Ranges = append(lease.Ranges(nil), m.Ranges...)
		mm.Holds = make([]Hold, len(m.Holds))
		for i, h := range m.Holds {
			mm.Holds[i] = Hold{Epoch: h.Epoch, Ranges: append(lease.Ranges(nil), h.Ranges...), Node0: h.Node0}
		}
		if len(mm.Holds) == 0 {
			mm.Holds = nil
		}
		out.Members[k] = &mm
	}
	return &out
}
