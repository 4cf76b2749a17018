package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/retryring/retryring/lease"
)

// Changer is what the admin calls that change something need of the coordinator beside Node: the
// parts that need Raft and the replicated state. It is defined here, where it is used, and
// implemented by the coordinator's adapter; this package reads the calls, checks what it can
// without the replicated state, decides to forward, and answers.
type Changer interface {
	// Leads reports whether this node leads and its leadership is ready to commit. A peer call on
	// a node that does not is forwarded once checked, a worker call as it came, body unread (the
	// leader looks the worker's ring up in its own state, which may know a worker that joined a
	// moment ago).
	Leads() bool
	// Commit turns change into its command and checks it against the replicated state's own
	// bounds (a refusal wraps lease.ErrBadRequest), on any node, leader or not. Then, when this
	// node does not lead or its leadership is not ready to commit, it returns ErrNotLeading;
	// else it tries the command on a copy of the replicated state, commits it and reads back
	// what the answer needs.
	Commit(change Change) (Committed, error)
	// Forward makes the call r, whose body was read already, to the leader and returns the
	// leader's answer as it came. It waits a moment for a leader whose admin address this node
	// knows (an election, a restart); none is lease.ErrNoLeader, a leader that did not answer
	// lease.ErrUnavailable.
	Forward(r *http.Request, body []byte) (Forwarded, error)

	// AddVoter adds a voter to the Raft configuration (a join, add-peer), RemoveVoter takes one
	// out with its registration (remove-peer); Configuration is the configuration as this node
	// has it. Called on the leader only (Leads).
	AddVoter(p PeerRequest) error
	RemoveVoter(p PeerRequest) error
	Configuration() ([]RaftServerView, error)
	// StepDown hands the lead over to the voter to, or to the one Raft picks when to is empty,
	// and says who took over (waiting up to 10 s, or until ctx ends); ErrNotLeading when this
	// node is not Raft's leader.
	StepDown(ctx context.Context, to string) (StepDownAnswer, error)
}

// Change is a call that changes a ring or a worker, as this package read it from its path and
// body: Pause, Resume, Limit, SetMovement or Cordon. The coordinator turns it into its command.
type Change interface{ isChange() }

// Pause is a pause call (PauseRequest) on Ring.
type Pause struct {
	Ring lease.RingKey
	PauseRequest
}

// Resume is a resume call (ResumeRequest) on Ring.
type Resume struct {
	Ring lease.RingKey
	ResumeRequest
}

// Limit is a limit call on Ring, checked: either Clear, or a PerSecond above 0.
type Limit struct {
	Ring      lease.RingKey
	PerSecond float64
	Clear     bool
}

// SetMovement is a movement call (MovementRequest) on Ring. Its mode and parameters are the
// replicated state's to check: the coordinator does, with the state's bounds.
type SetMovement struct {
	Ring lease.RingKey
	MovementRequest
}

// Cordon is a cordon call (Clear: uncordon) of the worker WorkerID, in the ring its body names
// (CordonRequest), else in the one ring of the leader's state with a member of that worker id.
type Cordon struct {
	WorkerID string
	Clear    bool
	CordonRequest
}

func (Pause) isChange()       {}
func (Cordon) isChange()      {}
func (Resume) isChange()      {}
func (Limit) isChange()       {}
func (SetMovement) isChange() {}

// Committed is what the leader read back from the replicated state once a change committed.
type Committed struct {
	// Command is the committed command's type and Args the command, for the log line of the
	// change.
	Command fmt.Stringer
	Args    any
	// Ring is the ring changed (a cordon's, as the leader found it); Controls are its controls
	// as committed (pause, resume, limit), Movement its movement setting (movement), Cordoned
	// whether the worker is cordoned in it (cordon, uncordon).
	Ring     lease.RingKey
	Controls ControlsView
	Movement MovementView
	Cordoned bool
}

// ServeChanges adds the calls that change something, made through c.
func (s *Server) ServeChanges(c Changer) {
	s.changer = c
	s.HandlePrefix(PathRings, s.serveRingCall)
	s.HandlePrefix(PathWorkers, s.serveWorkerCall)
	s.Handle(PathStepDown, http.MethodPost, s.serveStepDown)
	// A join is an add-peer asked by the joining node itself, on the internal path the edge
	// keeps for coordinators.
	s.Handle(PathJoin, http.MethodPost, s.serveAddPeer)
	s.Handle(PathAddPeer, http.MethodPost, s.serveAddPeer)
	s.Handle(PathRemovePeer, http.MethodPost, s.serveRemovePeer)
}

// change is the one way an admin call changes the replicated state. It reads the body and the
// change in it (bad input is answered 400 by any node, leader or not, and nothing is
// committed), then either forwards the call to the leader (a follower) or has the leader commit
// it, and answers what answer makes of what the leader read back. No leader, no quorum: 503; a
// server that may not know the command (the version gate): 409.
func (s *Server) change(w http.ResponseWriter, r *http.Request, read func(body []byte) (Change, error),
	answer func(Committed) any) {
	body, ok := ReadBody(w, r)
	if !ok {
		return
	}
	c, err := read(body)
	if err != nil {
		WriteError(w, err)
		return
	}
	got, err := s.changer.Commit(c)
	switch {
	case errors.Is(err, ErrNotLeading):
		s.forward(w, r, body)
		return
	case err != nil:
		WriteError(w, err)
		return
	}
	s.log.Info().Stringer("command", got.Command).Interface("args", got.Args).Str("remote", r.RemoteAddr).Msg("admin change committed")
	WriteJSON(w, http.StatusOK, answer(got))
}

// forward sends a call this node does not make itself to the leader and copies its answer back:
// the follower makes the call itself, with the caller's Authorization header, rather than
// redirecting (an HTTP client drops that header when a redirect changes the host). A call
// forwarded already is refused instead, so that two nodes with stale views of the leader never
// pass it back and forth.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if by := r.Header.Get(HeaderForwardedBy); by != "" {
		WriteError(w, fmt.Errorf("%w: %s forwarded this call to %s, which does not lead (an election may be under way); retry",
			lease.ErrNoLeader, by, s.node.ID()))
		return
	}
	a, err := s.changer.Forward(r, body)
	if err != nil {
		WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", a.ContentType)
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}
