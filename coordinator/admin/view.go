package admin

import (
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

// Ring returns the view of the ring named key, if the view has it.
func (v RingView) Ring(key lease.RingKey) (RingStateView, bool) {
	for _, r := range v.Rings {
		if r.Region == key.Region && r.Cluster == key.Cluster && r.Service == key.Service {
			return r, true
		}
	}
	return RingStateView{}, false
}

// Key is the ring's name.
func (r RingStateView) Key() lease.RingKey {
	return lease.RingKey{Region: r.Region, Cluster: r.Cluster, Service: r.Service}
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

// MovementView is a ring's movement mode as committed.
type MovementView struct {
	Mode string `json:"mode"`
	// Tolerance and MaxRanges are the minimal mode's parameters, defaults filled in; 0 in the
	// contiguous mode.
	Tolerance float64 `json:"tolerance,omitempty"`
	MaxRanges int     `json:"max_ranges,omitempty"`
	// ReturnDelayMs, IdleMs and StepMoves are its timing, defaults filled in; 0 in the
	// contiguous mode: a leaver's ranges wait ReturnDelayMs for its return, and an even-out step
	// of at most StepMoves moves follows IdleMs of a settled ring.
	ReturnDelayMs int64 `json:"return_delay_ms,omitempty"`
	IdleMs        int64 `json:"idle_ms,omitempty"`
	StepMoves     int   `json:"step_moves,omitempty"`
	// Reserved are the worker ids whose ranges wait for a new incarnation of the id, until the
	// leader hands them on (the minimal mode's return delay).
	Reserved []string `json:"reserved,omitempty"`
	// SinceMs is when the mode last changed (the leader's wall clock, Unix ms); 0: never set.
	SinceMs int64 `json:"since_ms,omitempty"`
}

// Report states of MemberReport and BacklogView.
const (
	// ReportFresh: received within three report periods.
	ReportFresh = "fresh"
	// ReportUnknown: older than that, or none received by this leader. Never read as "fine".
	ReportUnknown = "unknown"
)

// MemberReport is what the leader knows of a member from its ring.report (docs/protocol.md
// section 7.1): the last report as the worker sent it, its age, and the rates taken from it and an
// earlier one.
type MemberReport struct {
	// State is ReportFresh or ReportUnknown.
	State string `json:"state"`
	// AgeMs is how long ago this leader received the last report; null when it received none.
	AgeMs *int64 `json:"age_ms"`
	// ExecutionsPerS and DeadLettersPerHour are rates between the last report and an earlier one
	// at least half a period older; absent until there are two such reports.
	ExecutionsPerS     map[string]float64 `json:"executions_per_s,omitempty"`
	DeadLettersPerHour *float64           `json:"dead_letters_per_hour,omitempty"`
	// Report is the last report, its fields inline; absent when none was received.
	*lease.Report
}
