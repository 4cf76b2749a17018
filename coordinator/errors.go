package coordinator

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Errors of the node's lifecycle, returned by New and Start.
var (
	// ErrBadConfig: Config.Validate (in New), or Raft's own check of the configuration (in Start),
	// refused it.
	ErrBadConfig = errors.New("coordinator: bad config")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("coordinator: already started")
	// ErrClosed: the node was closed, killed, or failed to start, and cannot start again.
	ErrClosed = errors.New("coordinator: closed")
	// ErrNothingToRecover: Config.Recover on a data directory without Raft state (recover.go).
	ErrNothingToRecover = errors.New("coordinator: --recover: no raft state in the data directory")
	// ErrDataDirInUse: another process holds the data directory's lock file (datadirlock.go);
	// the error's text names the directory and the holder's pid.
	ErrDataDirInUse = errors.New("coordinator: data dir in use")
	// ErrJoinRefused: the cluster refused this node's --join (membership.go): its node id is a
	// voter already. The node stops (Node.Failed); the error's text says what to do.
	ErrJoinRefused = errors.New("coordinator: join refused")
)

// dataDirInUse is ErrDataDirInUse with the directory and the lock's holder, in one line.
type dataDirInUse struct{ dir, holder string }

func (e dataDirInUse) Error() string {
	return fmt.Sprintf("coordinator: data dir %s is in use by %s: stop it, or give this node its own --data-dir", e.dir, e.holder)
}

func (e dataDirInUse) Is(target error) bool { return target == ErrDataDirInUse }

// ErrUpgradeIncomplete is admin.ErrUpgradeIncomplete, the sentinel the admin API answers 409
// upgrade_incomplete: the leader refused to propose a command because a server of the Raft
// configuration registered an FSM version that does not know it (or none). The proposals
// (register.go) return it and the leader's term and settling wait on it under this name.
var ErrUpgradeIncomplete = admin.ErrUpgradeIncomplete

// commitErr maps the error of a Raft Apply (future error or FSM response) to the lease package's
// wire catalog (lease.ErrNotLeader, lease.ErrUnavailable, ...), the only errors sent to workers,
// keeping the original in the chain (errors.Is still finds fsm.ErrUnsafeAssignment). wireFailure
// encodes them at the edge.
func commitErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// The command may or may not have committed: the commands are idempotent, so the worker
		// simply retries with the leader.
		return fmt.Errorf("%w: %w", lease.ErrNotLeader, err)
	case errors.Is(err, fsm.ErrStaleTerm):
		// Proposed by a stretch of leadership that had ended: nothing was changed; the worker
		// retries with the leader, which decides again in its own term.
		return fmt.Errorf("%w: %w", lease.ErrNotLeader, err)
	case errors.Is(err, fsm.ErrUnknownMember):
		return fmt.Errorf("%w: %w", lease.ErrUnknownWorker, err)
	case errors.Is(err, fsm.ErrBadEpoch), errors.Is(err, fsm.ErrMalformed):
		return fmt.Errorf("%w: %w", lease.ErrBadRequest, err)
	case errors.Is(err, fsm.ErrUnsafeAssignment):
		return fmt.Errorf("%w: %w", lease.ErrInternal, err)
	default:
		// ErrEnqueueTimeout, ErrRaftShutdown, a lost quorum: nothing could be written.
		return fmt.Errorf("%w: %w", lease.ErrUnavailable, err)
	}
}
