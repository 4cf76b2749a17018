package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/retryring/retryring/lease"
)

// CommandType is the first byte of every log entry. Values are never reused.
type CommandType uint8

// Command types.
const (
	TypeRegisterCoordinator CommandType = 1
	TypeRemoveCoordinator   CommandType = 2
	TypeJoin                CommandType = 3
	TypeDown                CommandType = 4
	TypeLeave               CommandType = 5
	TypeRelease             CommandType = 6
	TypeExpire              CommandType = 7
	TypeAssign              CommandType = 8
	TypeCommitTiming        CommandType = 9
	TypeRetireTiming        CommandType = 10
	TypePause               CommandType = 11
	TypeResume              CommandType = 12
	TypeLimit               CommandType = 13
	TypeReconcile           CommandType = 14
	TypeCordon              CommandType = 15
	TypeEpochFloor          CommandType = 16
	TypeInTerm              CommandType = 17
	TypeSetMovement         CommandType = 18
	TypeHandOn              CommandType = 19
	TypeEvenOut             CommandType = 20
)

// Version is the FSM version of this build: it knows every command type, body version and
// snapshot format introduced up to it. Version 1 is the lease commands (types 1 to 8); version 2
// adds the lease timing (9, 10) and the flow controls (11 to 13), and snapshots of format 2;
// version 3 adds Reconcile (14), one entry for what a pass of the leader decided for a ring. The
// state did not change with version 3, so snapshots stay at format 2 at most. Version 4 adds the
// epoch floor (16) that a bootstrapped or recovered cluster commits first, and snapshots of
// format 4 once the state holds one.
//
// A coordinator registers its version (Coordinator.FSMVersion) and the leader proposes a command
// only once every server of the Raft configuration registered a version at least its Since: the
// version gate. A node that meets an entry it does not know anyway (an old node added to an
// upgraded cluster) stops applying (FSM.Halted): skipping it would leave it with another state
// than its peers, for instance a ring that the others hold paused.
//
// Version 4 adds Cordon (15): a worker id in a ring that gets no range and not Node-0. Its state
// (Ring.Cordoned) needs snapshots of format 4: a version 3 node would drop it.
//
// Version 5 adds InTerm (17): a command of one stretch of leadership, applied only in a log entry
// of the stretch's Raft term. The state did not change, so snapshots stay at format 4 at most.
//
// Version 6 adds SetMovement (18): a ring's movement mode, contiguous (the default) or minimal,
// HandOn (19): the leader's decision that a minimal-mode ring's reserved slot waited long
// enough, and EvenOut (20): one step of the idle even-out. Their state (Ring.Movement, with the target) needs snapshots of format 6: a version 5
// node would drop it and plan the ring contiguously while its peers plan it minimally.
const Version = 6

// commandNames are the names logs and transcripts give the command types.
var commandNames = map[CommandType]string{
	TypeRegisterCoordinator: "register_coordinator",
	TypeRemoveCoordinator:   "remove_coordinator",
	TypeJoin:                "join",
	TypeDown:                "down",
	TypeLeave:               "leave",
	TypeRelease:             "release",
	TypeExpire:              "expire",
	TypeAssign:              "assign",
	TypeCommitTiming:        "commit_timing",
	TypeRetireTiming:        "retire_timing",
	TypePause:               "pause",
	TypeResume:              "resume",
	TypeLimit:               "limit",
	TypeReconcile:           "reconcile",
	TypeCordon:              "cordon",
	TypeEpochFloor:          "epoch_floor",
	TypeInTerm:              "in_term",
	TypeSetMovement:         "set_movement",
	TypeHandOn:              "hand_on",
	TypeEvenOut:             "even_out",
}

// introducedIn lists, for each FSM version, the command types it introduced.
var introducedIn = map[int][]CommandType{
	1: {TypeRegisterCoordinator, TypeRemoveCoordinator, TypeJoin, TypeDown, TypeLeave, TypeRelease, TypeExpire, TypeAssign},
	2: {TypeCommitTiming, TypeRetireTiming, TypePause, TypeResume, TypeLimit},
	3: {TypeReconcile},
	4: {TypeCordon, TypeEpochFloor},
	5: {TypeInTerm},
	6: {TypeSetMovement, TypeHandOn, TypeEvenOut},
}

// bodyVersion is the second byte of every entry this build writes. Every type is at body 1 so
// far. A body that a node not knowing the change would apply differently needs the next body
// version of its type, introduced by a new FSM version; a field such a node may ignore without
// changing its state needs none (Coordinator.FSMVersion: only the leader's version gate reads it).
const bodyVersion uint8 = 1

// String is the type's name in snake case, as logs print it; "unknown(n)" for a type this node
// does not know.
func (t CommandType) String() string {
	if name, ok := commandNames[t]; ok {
		return name
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Since is the FSM version that introduced the command type: the version every server must have
// registered before the leader proposes it. 0 for a type this build does not know.
func (t CommandType) Since() int {
	for v, types := range introducedIn {
		if slices.Contains(types, t) {
			return v
		}
	}
	return 0
}

// Errors of Apply. They come back as the response of the raft log entry; the state is unchanged.
var (
	// ErrUnknownCommand: the entry's type or body version is not known to this node's FSM
	// version. The FSM halts on it (FSM.Halted).
	ErrUnknownCommand = errors.New("fsm: unknown command type or version")
	// ErrHalted: the FSM stopped applying at an entry it does not know; nothing after it is
	// applied until the node runs a version that knows it.
	ErrHalted = errors.New("fsm: halted at an unknown command")
	// ErrMalformed: the entry could not be decoded, or it is not well formed (a join without a
	// worker id; an assignment of epoch 0, with a node index out of range or a range that starts
	// past its end; an Assign that names a member or an epoch twice).
	ErrMalformed = errors.New("fsm: malformed command")
	// ErrUnsafeAssignment: the Assign would give a token or Node-0 to a member while another holds it
	// (or while another incarnation of its worker id holds anything), or it was planned on an older
	// state (its epochs are taken, or the members it names departed). Nothing was changed; plan again.
	ErrUnsafeAssignment = errors.New("fsm: unsafe or stale assignment")
	// ErrUnknownMember: the command names a member that does not exist.
	ErrUnknownMember = errors.New("fsm: unknown member")
	// ErrBadEpoch: a release names an epoch newer than the member's current one.
	ErrBadEpoch = errors.New("fsm: release of an epoch not yet assigned")
)

// Command is one replicated change.
type Command interface {
	Type() CommandType
}

// RegisterCoordinator records (or updates) a coordinator's addresses.
type RegisterCoordinator struct {
	Coordinator
}

// RemoveCoordinator forgets a coordinator (it was removed from the raft configuration).
type RemoveCoordinator struct {
	ID string `json:"id"`
}

// Join makes an incarnation of a worker an active member of a ring. A newer incarnation of the same
// worker id supersedes the older one, which stays as a departed holder until its leases end.
type Join struct {
	Ring        lease.RingKey `json:"ring"`
	WorkerID    string        `json:"worker_id"`
	Incarnation string        `json:"incarnation"`
}

// Down marks a member departed: its connection closed or it fell silent. Its assignment stays held
// until it expires.
type Down struct {
	Ring        lease.RingKey `json:"ring"`
	WorkerID    string        `json:"worker_id"`
	Incarnation string        `json:"incarnation"`
}

// Leave removes a member and everything it held: the worker said it stopped using every range.
type Leave struct {
	Ring        lease.RingKey `json:"ring"`
	WorkerID    string        `json:"worker_id"`
	Incarnation string        `json:"incarnation"`
}

// Release says the member uses nothing but its lease of Epoch: holds of older epochs are freed.
type Release struct {
	Ring        lease.RingKey `json:"ring"`
	WorkerID    string        `json:"worker_id"`
	Incarnation string        `json:"incarnation"`
	Epoch       uint64        `json:"epoch"`
}

// Expire says that no lease of the member with an epoch up to UpTo can still be in use: the leader
// sent the last one long enough ago. A departed member whose current epoch is covered is removed.
//
// Generation is the ring's generation in the state the leader decided on. The Expire is applied
// after every entry proposed before it, among them perhaps a reconnect of the member, after which
// the leader renewed its lease again; so an Expire decided before the member last became active
// changes nothing, and the leader decides again from what it sent since.
type Expire struct {
	Ring        lease.RingKey `json:"ring"`
	WorkerID    string        `json:"worker_id"`
	Incarnation string        `json:"incarnation"`
	UpTo        uint64        `json:"up_to"`
	Generation  uint64        `json:"generation"`
}

// Assign installs new assignments, each with a fresh epoch, planned by Plan on the current state.
type Assign struct {
	Ring        lease.RingKey `json:"ring"`
	Assignments []Assignment  `json:"assignments"`
}

// Assignment is one member's new assignment.
type Assignment struct {
	WorkerID    string       `json:"worker_id"`
	Incarnation string       `json:"incarnation"`
	Epoch       uint64       `json:"epoch"`
	NodeIndex   int          `json:"node_index"`
	NodeCount   int          `json:"node_count"`
	Ranges      lease.Ranges `json:"ranges"`
}

// CommitTiming records the lease timing the leader runs with. A leader commits it before it
// sends any lease, so that every later leader can bound the leases it may have sent.
type CommitTiming struct {
	Timing LeaseTiming `json:"timing"`
}

// RetireTiming lowers the longest committed timing to Keep, the timing in force: the leader that
// proposes it has waited, past its election, for the leader lease plus the holder bound of
// Retire, so no lease sent under Retire can still be in use. It changes nothing unless Retire is
// still the longest and Keep still the timing in force (a decision taken on an older state).
type RetireTiming struct {
	Retire LeaseTiming `json:"retire"`
	Keep   LeaseTiming `json:"keep"`
}

// Pause pauses a ring: the whole ring when Impl is empty (no traversal, no execution), else the
// executions of the named stacksaga impl types, added to those already paused. The ring need not
// exist yet. AtMs is the leader's wall clock, for people (Controls.SinceMs).
type Pause struct {
	Ring   lease.RingKey `json:"ring"`
	Impl   []string      `json:"impl,omitempty"`
	Reason string        `json:"reason,omitempty"`
	AtMs   int64         `json:"at_ms"`
}

// Resume ends a pause: every pause of the ring when Impl is empty, else the pauses of the named
// impl types (a pause of the whole ring stays).
type Resume struct {
	Ring lease.RingKey `json:"ring"`
	Impl []string      `json:"impl,omitempty"`
	AtMs int64         `json:"at_ms"`
}

// Limit sets the ring's execution rate limit to PerSecond (> 0, finite), or clears it.
type Limit struct {
	Ring      lease.RingKey `json:"ring"`
	PerSecond float64       `json:"per_second,omitempty"`
	Clear     bool          `json:"clear,omitempty"`
	AtMs      int64         `json:"at_ms"`
}

// Type implements Command.
func (RegisterCoordinator) Type() CommandType { return TypeRegisterCoordinator }

// Type implements Command.
func (RemoveCoordinator) Type() CommandType { return TypeRemoveCoordinator }

// Type implements Command.
func (Join) Type() CommandType { return TypeJoin }

// Type implements Command.
func (Down) Type() CommandType { return TypeDown }

// Type implements Command.
func (Leave) Type() CommandType { return TypeLeave }

// Type implements Command.
func (Release) Type() CommandType { return TypeRelease }

// Type implements Command.
func (Expire) Type() CommandType { return TypeExpire }

// Type implements Command.
func (Assign) Type() CommandType { return TypeAssign }

// Type implements Command.
func (CommitTiming) Type() CommandType { return TypeCommitTiming }

// Type implements Command.
func (RetireTiming) Type() CommandType { return TypeRetireTiming }

// Type implements Command.
func (Pause) Type() CommandType { return TypePause }

// Type implements Command.
func (Resume) Type() CommandType { return TypeResume }

// Type implements Command.
func (Limit) Type() CommandType { return TypeLimit }

// Encode serializes a command as [type][body version][JSON].
func Encode(c Command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %T: %w", c, err)
	}
	return append([]byte{byte(c.Type()), bodyVersion}, body...), nil
}

// Decode parses an entry as a node of this build's Version does.
func Decode(b []byte) (Command, error) { return decodeAt(b, Version) }

// decodeAt parses an entry as a node of FSM version v does: a type v does not know, or a newer
// body version, gives ErrUnknownCommand.
func decodeAt(b []byte, v int) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if since := CommandType(b[0]).Since(); since == 0 || since > v || b[1] > bodyVersion {
		return nil, fmt.Errorf("%w: type %d version %d (this node runs FSM version %d)", ErrUnknownCommand, b[0], b[1], v)
	}
	var c Command
	switch CommandType(b[0]) {
	case TypeRegisterCoordinator:
		c = &RegisterCoordinator{}
	case TypeRemoveCoordinator:
		c = &RemoveCoordinator{}
	case TypeJoin:
		c = &Join{}
	case TypeDown:
		c = &Down{}
	case TypeLeave:
		c = &Leave{}
	case TypeRelease:
		c = &Release{}
	case TypeExpire:
		c = &Expire{}
	case TypeAssign:
		c = &Assign{}
	case TypeCommitTiming:
		c = &CommitTiming{}
	case TypeRetireTiming:
		c = &RetireTiming{}
	case TypePause:
		c = &Pause{}
	case TypeResume:
		c = &Resume{}
	case TypeLimit:
		c = &Limit{}
	case TypeReconcile:
		c = &Reconcile{}
	case TypeCordon:
		c = &Cordon{}
	case TypeEpochFloor:
		c = &EpochFloor{}
	case TypeInTerm:
		c = &InTerm{}
	case TypeSetMovement:
		c = &SetMovement{}
	case TypeHandOn:
		c = &HandOn{}
	case TypeEvenOut:
		c = &EvenOut{}
	}
	if err := json.Unmarshal(b[2:], c); err != nil {
		return nil, fmt.Errorf("%w: type %d: %w", ErrMalformed, b[0], err)
	}
	return c, nil
}
