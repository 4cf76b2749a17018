package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

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
)

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
}

// String is the type's name in snake case, as logs print it; "unknown(n)" for a type this node
// does not know.
func (t CommandType) String() string {
	if name, ok := commandNames[t]; ok {
		return name
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// Version is the second byte of every log entry: the version of the JSON body of its type. A node
// skips an entry whose version is newer than it knows.
const Version uint8 = 1

// Errors of Apply. They come back as the response of the raft log entry; the state is unchanged.
var (
	// ErrUnknownCommand: the entry's type or version is not known to this node; it was skipped.
	ErrUnknownCommand = errors.New("fsm: unknown command type or version")
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

// Encode serializes a command as [type][version][JSON].
func Encode(c Command) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("fsm: encode %T: %w", c, err)
	}
	return append([]byte{byte(c.Type()), Version}, body...), nil
}

// Decode parses an entry. Unknown types and newer versions give ErrUnknownCommand.
func Decode(b []byte) (Command, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	if b[1] > Version {
		return nil, fmt.Errorf("%w: type %d version %d", ErrUnknownCommand, b[0], b[1])
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
	default:
		return nil, fmt.Errorf("%w: type %d", ErrUnknownCommand, b[0])
	}
	if err := json.Unmarshal(b[2:], c); err != nil {
		return nil, fmt.Errorf("%w: type %d: %w", ErrMalformed, b[0], err)
	}
	return c, nil
}
