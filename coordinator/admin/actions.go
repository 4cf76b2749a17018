package admin

import "github.com/retryring/retryring/lease"

// The bodies and answers of the admin calls that change something: the ring calls (pause,
// resume, limit, movement), the worker calls (cordon, uncordon) and the Raft configuration calls
// (join, add-peer, remove-peer). The coordinator's handlers read and commit them.

// PauseRequest pauses the ring's executions of Impl (stacksaga impl types), or the whole ring
// (no traversal, no execution) when Impl is empty. Reason is a note for people.
type PauseRequest struct {
	Impl   []string `json:"impl,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// ResumeRequest ends the pauses of Impl, or every pause of the ring when Impl is empty.
type ResumeRequest struct {
	Impl []string `json:"impl,omitempty"`
}

// LimitRequest sets the ring's execution rate limit to PerSecond (above 0), or clears it.
type LimitRequest struct {
	PerSecond *float64 `json:"per_second,omitempty"`
	Clear     bool     `json:"clear,omitempty"`
}

// ControlsAnswer answers every ring call: the ring, its controls as committed, and the leader
// that committed them.
type ControlsAnswer struct {
	Ring     lease.RingKey `json:"ring"`
	Controls ControlsView  `json:"controls"`
	LeaderID string        `json:"leader_id"`
}

// MovementRequest sets the ring's movement mode: "contiguous" (the default: the equal split in
// join order) or "minimal" (docs/architecture.md, "The minimal movement mode"), with its
// tolerance (0 to 0.5, default 0.1), its most ranges per member (default 16), its return delay
// (1 s to 10 min, default 10 s), its idle time before an even-out step (1 s to 1 h, default 10 s)
// and the most moves of one step (1 to 1024, default 8); all are refused with "contiguous".
// A parameter left out takes its default.
type MovementRequest struct {
	Mode          string   `json:"mode"`
	Tolerance     *float64 `json:"tolerance,omitempty"`
	MaxRanges     *int     `json:"max_ranges,omitempty"`
	ReturnDelayMs *int64   `json:"return_delay_ms,omitempty"`
	IdleMs        *int64   `json:"idle_ms,omitempty"`
	StepMoves     *int     `json:"step_moves,omitempty"`
}

// MovementAnswer answers a movement call: the ring, its mode as committed, and the leader that
// committed it.
type MovementAnswer struct {
	Ring     lease.RingKey `json:"ring"`
	Movement MovementView  `json:"movement"`
	LeaderID string        `json:"leader_id"`
}

// CordonRequest names the ring of the worker; it may be left out when the worker id is a member
// of one ring only (the node that gets the call looks it up in its replicated state).
type CordonRequest struct {
	Ring *lease.RingKey `json:"ring,omitempty"`
}

// CordonAnswer is the worker's cordon as committed, and the leader that committed it.
type CordonAnswer struct {
	Ring     lease.RingKey `json:"ring"`
	WorkerID string        `json:"worker_id"`
	Cordoned bool          `json:"cordoned"`
	LeaderID string        `json:"leader_id"`
}

// PeerRequest names a voter: its node id and, to add it, the Raft address the others dial.
// Replace (--replace, ctl add-peer --replace) says the operator means to replace a voter of that
// id: the leader removes it (and its registration) and adds this one, wherever it was. EmptyLog
// is set by a node that joins from an empty data directory.
type PeerRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr,omitempty"`
	Replace  bool   `json:"replace,omitempty"`
	EmptyLog bool   `json:"empty_log,omitempty"`
	// DryRun asks only whether the leader would add the node: a node joining from an empty data
	// directory asks it before it takes any Raft traffic (the coordinator's stream layer), and only then the
	// real join, whose commit may need its vote.
	DryRun bool `json:"dry_run,omitempty"`
}

// PeerChangeAnswer answers join, add-peer and remove-peer: the Raft configuration after
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
