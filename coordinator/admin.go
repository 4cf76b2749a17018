package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// leaderWait bounds how long a follower waits for a leader whose admin address it knows before it
// answers a call it would forward no_leader: an election after the leader's removal or loss fits
// in it, and with forwardTimeout it stays within ctl's 15 s for a mutation.
const leaderWait = 5 * time.Second

// forwardTimeout bounds a follower's call to the leader, commit included.
const forwardTimeout = 5 * time.Second

// commitChange is the leader's side of a call that changes a ring or a worker (admin.Changer's
// Commit): it builds the command (bad input is lease.ErrBadRequest on any node, and nothing is
// committed), and on the leader checks it against a copy of the state, commits it and reads
// back what the answer needs; on a follower it is admin.ErrNotLeading, and admin forwards.
func (n *Node) commitChange(c admin.Change) (admin.Committed, error) {
	cmd, ring, err := changeCommand(c, n.clock.Now().UnixMilli(), n.ringOfWorker)
	if err != nil {
		return admin.Committed{}, err
	}
	t := n.currentTerm()
	if t == nil || !t.isReady() {
		return admin.Committed{}, admin.ErrNotLeading
	}
	var trial error
	n.fsm.View(func(s *fsm.State, _ uint64) { trial = s.Clone().Apply(cmd) })
	if trial != nil {
		return admin.Committed{}, commitErr(trial)
	}
	if err := t.apply(cmd); err != nil {
		if errors.Is(err, lease.ErrNotLeader) || errors.Is(err, lease.ErrNoLeader) {
			// An HTTP caller cannot follow an RSocket address; its next call reaches the new
			// leader through any node.
			err = fmt.Errorf("%w: %s lost the lead while committing; the change may or may not be committed (every call is idempotent): retry",
				lease.ErrNoLeader, n.cfg.NodeID)
		}
		return admin.Committed{}, err
	}
	got := admin.Committed{Command: cmd.Type(), Args: cmd, Ring: ring}
	n.fsm.View(func(s *fsm.State, _ uint64) {
		r := s.Ring(ring)
		var controls *fsm.Controls
		if r != nil {
			controls = r.Controls
			if c, ok := c.(admin.Cordon); ok {
				got.Cordoned = r.IsCordoned(c.WorkerID)
			}
		}
		got.Controls, got.Movement = controlsView(controls), movementView(r)
	})
	return got, nil
}

// changeCommand is the command of a change and the ring it acts on, checked against the
// replicated state's bounds; bad input is lease.ErrBadRequest. ringOf finds the ring of a
// worker whose cordon call names none.
func changeCommand(c admin.Change, atMs int64, ringOf func(workerID string) (lease.RingKey, error)) (fsm.Command, lease.RingKey, error) {
	var cmd interface {
		fsm.Command
		Validate() error
	}
	var ring lease.RingKey
	switch c := c.(type) {
	case admin.Pause:
		ring, cmd = c.Ring, &fsm.Pause{Ring: c.Ring, Impl: c.Impl, Reason: c.Reason, AtMs: atMs}
	case admin.Resume:
		ring, cmd = c.Ring, &fsm.Resume{Ring: c.Ring, Impl: c.Impl, AtMs: atMs}
	case admin.Limit:
		ring, cmd = c.Ring, &fsm.Limit{Ring: c.Ring, PerSecond: c.PerSecond, Clear: c.Clear, AtMs: atMs}
	case admin.SetMovement:
		m, err := movementCommand(c.Ring, c.MovementRequest, atMs)
		return m, c.Ring, err
	case admin.Cordon:
		if c.Ring != nil {
			ring = *c.Ring
		} else if r, err := ringOf(c.WorkerID); err != nil {
			return nil, ring, err
		} else {
			ring = r
		}
		cmd = &fsm.Cordon{Ring: ring, WorkerID: c.WorkerID, Clear: c.Clear}
	default:
		panic(fmt.Sprintf("coordinator: a change of type %T has no command", c)) // admin.Change is a closed set
	}
	if err := cmd.Validate(); err != nil {
		return nil, ring, fmt.Errorf("%w: %w", lease.ErrBadRequest, err)
	}
	return cmd, ring, nil
}

// awaitLeaderToForward waits, at most wait, for a leader other than this node whose admin address
// this node has applied, and returns it. Each poll asks Raft for the leader again: for a moment
// after a restart this node knows the leader but has not applied its registration; while an
// election is under way it knows no leader, or it is being elected itself; and when the leader
// itself was just removed
// (`ctl remove-peer` of the leader), its registration is gone while it still leads until the
// removal commits and the others elect. A call in any of these moments waits for the next leader
// instead of failing.
func (n *Node) awaitLeaderToForward(ctx context.Context, wait time.Duration) (leaderID, addr string, err error) {
	deadline := time.Now().Add(wait)
	for {
		_, lid := n.raft.LeaderWithID()
		leaderID = string(lid)
		switch {
		case leaderID == "":
			err = fmt.Errorf("%w: no leader known (an election is under way, or quorum is lost)", lease.ErrNoLeader)
		case leaderID == n.cfg.NodeID:
			// This node is taking the lead (or leaving it). Once its leadership is ready the call
			// goes to its own admin endpoint like any forwarded call, where the leader's path
			// takes it.
			err = fmt.Errorf("%w: this node is taking or leaving the lead; retry", lease.ErrNoLeader)
			if t := n.currentTerm(); t != nil && t.isReady() {
				if addr = n.peerHTTPAddr(leaderID); addr != "" {
					return leaderID, addr, nil
				}
			}
		default:
			if addr = n.peerHTTPAddr(leaderID); addr != "" {
				return leaderID, addr, nil
			}
			err = fmt.Errorf("%w: leader %s has not registered its address yet", lease.ErrNoLeader, leaderID)
		}
		if !time.Now().Before(deadline) {
			return "", "", err
		}
		select {
		case <-ctx.Done():
			return "", "", err
		case <-n.stop:
			return "", "", err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// forward is admin.Changer's Forward: it sends an admin call to the leader's admin HTTP address
// and returns the leader's answer, asking Raft again within leaderWait when the node taken for
// the leader answers that it does not lead.
func (n *Node) forward(r *http.Request, body []byte) (admin.Forwarded, error) {
	deadline := time.Now().Add(leaderWait)
	for {
		leaderID, addr, err := n.awaitLeaderToForward(r.Context(), time.Until(deadline))
		if err != nil {
			return admin.Forwarded{}, err
		}
		a, err := n.forwardOnce(r, body, leaderID, addr)
		if err != nil {
			return admin.Forwarded{}, err
		}
		// The node taken for the leader answered that it does not lead: it lost the lead (or was
		// removed) after this node last heard of it. Ask Raft again, within the same wait; every
		// admin call is idempotent, so one whose commit the old leader may have made is safe to
		// make again.
		if a.NoLeader() && time.Now().Before(deadline) && r.Context().Err() == nil {
			select {
			case <-r.Context().Done():
			case <-n.stop:
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		return a, nil
	}
}

// forwardOnce makes the call r (with body) to the leader leaderID at addr.
func (n *Node) forwardOnce(r *http.Request, body []byte, leaderID, addr string) (admin.Forwarded, error) {
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.peerURL(addr, r.URL.RequestURI()), bytes.NewReader(body))
	if err != nil {
		return admin.Forwarded{}, fmt.Errorf("%w: %w", lease.ErrInternal, err)
	}
	for _, h := range []string{"Content-Type", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(admin.HeaderForwardedBy, n.cfg.NodeID)
	// This node checked the call at its own edge; a forwarded /v1/internal/ call (a join asked of a
	// follower) reaches the leader as this coordinator's.
	n.signInternal(req)
	resp, err := n.peerHTTPClient(0).Do(req)
	if mismatch := n.explainPeerHTTP(addr, resp, err); mismatch != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return admin.Forwarded{}, fmt.Errorf("%w: leader %s: %w", lease.ErrUnavailable, leaderID, mismatch)
	}
	if err != nil {
		return admin.Forwarded{}, fmt.Errorf("%w: leader %s at %s did not answer: %w", lease.ErrUnavailable, leaderID, addr, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return admin.Forwarded{}, fmt.Errorf("%w: leader %s's answer: %w", lease.ErrUnavailable, leaderID, err)
	}
	return admin.Forwarded{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: answer}, nil
}
