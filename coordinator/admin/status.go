package admin

// The answers of GET /readyz, GET /v1/status, GET /v1/peers and POST /v1/step-down.

// Readiness is the answer of GET /readyz: whether this node is ready (a leader is known and
// this node applied the log up to the commit index it last learned) and why not.
type Readiness struct {
	Ready        bool   `json:"ready"`
	Reason       string `json:"reason,omitempty"`
	LeaderID     string `json:"leader_id"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
}

// NodeStatus is one coordinator as it describes itself: its Raft state and indexes (raft.Stats),
// its replicated state in numbers, and whether it is ready (GET /readyz) and why not.
type NodeStatus struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	RSocketAddr string `json:"rsocket_addr"`
	HTTPAddr    string `json:"http_addr"`
	// State is Raft's: "leader", "follower", "candidate" or "shutdown".
	State    string `json:"state"`
	Term     uint64 `json:"term"`
	LeaderID string `json:"leader_id"`
	// LastContact is when this node last heard from the leader, as Raft says it ("0" on the
	// leader, "never" before the first contact, else a duration such as "12.5ms").
	LastContact  string `json:"last_contact"`
	LastLogIndex uint64 `json:"last_log_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// FSMVersion is the FSM version this node's build runs.
	FSMVersion int `json:"fsm_version"`
	Rings      int `json:"rings"`
	Members    int `json:"members"`
	Cordoned   int `json:"cordoned"`
	// EpochFloor is the floor every ring's epochs start above (0 before the first leader of a
	// new state committed it); Settling: that leader is still waiting out every lease that may be
	// alive from before a bootstrap or recovery, and assigns nothing meanwhile.
	EpochFloor uint64 `json:"epoch_floor"`
	Settling   bool   `json:"settling"`
	Ready      bool   `json:"ready"`
	Reason     string `json:"reason,omitempty"`
}

// StatusAnswer is the answer of GET /v1/status: the node asked and the leader. Leader is nil when
// no leader is known or it did not answer (LeaderError says which).
type StatusAnswer struct {
	Node        NodeStatus  `json:"node"`
	Leader      *NodeStatus `json:"leader"`
	LeaderError string      `json:"leader_error,omitempty"`
}

// PeerStatus is one server of the Raft configuration: what the configuration says of it (id, Raft
// address, voter), and what it says of itself (Status), or why it could not be asked (Error).
type PeerStatus struct {
	ID       string      `json:"id"`
	RaftAddr string      `json:"raft_addr"`
	Voter    bool        `json:"voter"`
	Status   *NodeStatus `json:"status"`
	Error    string      `json:"error,omitempty"`
	// Problem names, in one word, why Status is missing: PeerUnreachable, PeerUnregistered, or
	// PeerUnknown (the coordinator asked has not applied its log since it started, so it does
	// not know the peer's admin address yet). Error says it in words.
	Problem string `json:"problem,omitempty"`
}

// PeerStatus.Problem values.
const (
	PeerUnreachable  = "unreachable"
	PeerUnregistered = "unregistered"
	PeerUnknown      = "unknown"
)

// PeersAnswer is the answer of GET /v1/peers, the servers in the configuration's order.
type PeersAnswer struct {
	CoordinatorID string       `json:"coordinator_id"`
	LeaderID      string       `json:"leader_id"`
	Peers         []PeerStatus `json:"peers"`
}

// StepDownRequest asks the leader to hand the lead over: to To, a voter of the configuration, or
// to the voter Raft finds most up to date when To is empty.
type StepDownRequest struct {
	To string `json:"to,omitempty"`
}

// StepDownAnswer says who led before, who leads now (empty when no new leader was seen within
// the leader's wait, 10 s), the new term, and how long the handover took as the old leader saw it.
type StepDownAnswer struct {
	PreviousLeader string `json:"previous_leader"`
	LeaderID       string `json:"leader_id"`
	Term           uint64 `json:"term"`
	TookMs         int64  `json:"took_ms"`
}
