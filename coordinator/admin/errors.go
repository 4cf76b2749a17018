package admin

import "errors"

// Errors of the admin calls that change something which the lease package's wire catalog has no
// code for. The coordinator returns them and WriteError answers them (but ErrNotLeading, which
// makes the call go to the leader); they live here, where they are mapped to status codes, so
// that this package never imports the coordinator.
var (
	// ErrUpgradeIncomplete: the leader refused to propose a command because a server of the Raft
	// configuration registered an FSM version that does not know it (or none): that server would
	// stop applying the log at it. Answered 409 CodeUpgradeIncomplete.
	ErrUpgradeIncomplete = errors.New("upgrade_incomplete")
	// ErrPeerConflict: the leader refused to add a voter because a voter of that node id is in the
	// configuration already, at another address or with a log the joining node no longer has; the
	// operator removes it first, or says replace. Answered 409 CodePeerConflict.
	ErrPeerConflict = errors.New("peer_conflict")
	// ErrNotLeading: the node asked to make a change does not lead, or its leadership is not
	// ready to commit yet; the call goes to the leader instead (Changer.Forward). Never answered
	// as such.
	ErrNotLeading = errors.New("this node does not lead")
)

// Error codes of the admin API beside the lease package's.
const (
	// CodeUpgradeIncomplete is ErrUpgradeIncomplete's code (HTTP 409).
	CodeUpgradeIncomplete = "upgrade_incomplete"
	// CodePeerConflict is ErrPeerConflict's code (HTTP 409).
	CodePeerConflict = "peer_conflict"
)
