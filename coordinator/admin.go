package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// PathRings is the prefix of the per-ring admin calls, each a POST of a JSON body:
//
//	POST /v1/rings/{region}/{cluster}/{service}/pause   PauseRequest
//	POST /v1/rings/{region}/{cluster}/{service}/resume  ResumeRequest
//	POST /v1/rings/{region}/{cluster}/{service}/limit   LimitRequest
//	POST /v1/rings/{region}/{cluster}/{service}/movement   MovementRequest (movement.go)
//
// Each answers ControlsAnswer, the controls as committed (movement: MovementAnswer). The names are path segments, escaped
// as URLs escape them (a "/" in a name is %2F).
const PathRings = "/v1/rings/"

// Actions on a ring.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionLimit  = "limit"
)

// leaderWait bounds how long a follower waits for a leader whose admin address it knows before it
// answers a call it would forward no_leader: an election after the leader's removal or loss fits
// in it, and with forwardTimeout it stays within ctl's 15 s for a mutation.
const leaderWait = 5 * time.Second

// forwardTimeout bounds a follower's call to the leader, commit included.
const forwardTimeout = 5 * time.Second

// serveRingAction serves PathRings: it finds the ring and the action, and builds the command from
// the body; mutation does the rest.
func (n *Node) serveRingAction(w http.ResponseWriter, r *http.Request) {
	ring, action, err := parseRingPath(r.URL.EscapedPath())
	if err != nil {
		admin.WriteJSON(w, http.StatusNotFound, lease.WireError{Code: "not_found", Message: err.Error()})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		admin.WriteJSON(w, http.StatusMethodNotAllowed, lease.WireError{Code: "method_not_allowed", Message: r.Method + " " + r.URL.Path})
		return
	}
	if action == ActionMovement {
		n.mutation(w, r, func(body []byte, atMs int64) (fsm.Command, error) {
			return movementCommand(ring, body, atMs)
		}, func(s *fsm.State, leaderID string) any {
			return admin.MovementAnswer{Ring: ring, Movement: movementView(s.Ring(ring)), LeaderID: leaderID}
		})
		return
	}
	n.mutation(w, r, func(body []byte, atMs int64) (fsm.Command, error) {
		return ringCommand(ring, action, body, atMs)
	}, func(s *fsm.State, leaderID string) any {
		var c *fsm.Controls
		if rs := s.Ring(ring); rs != nil {
			c = rs.Controls
		}
		return admin.ControlsAnswer{Ring: ring, Controls: controlsView(c), LeaderID: leaderID}
	})
}

// parseRingPath reads /v1/rings/{region}/{cluster}/{service}/{action}.
func parseRingPath(escaped string) (lease.RingKey, string, error) {
	usage := fmt.Errorf("want POST %s{region}/{cluster}/{service}/%s|%s|%s|%s", PathRings, ActionPause, ActionResume, ActionLimit, ActionMovement)
	parts := strings.Split(strings.TrimPrefix(escaped, PathRings), "/")
	if len(parts) != 4 {
		return lease.RingKey{}, "", usage
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return lease.RingKey{}, "", fmt.Errorf("%w: %w", usage, err)
		}
		parts[i] = u
	}
	switch parts[3] {
	case ActionPause, ActionResume, ActionLimit, ActionMovement:
	default:
		return lease.RingKey{}, "", fmt.Errorf("no action %q: %w", parts[3], usage)
	}
	return lease.RingKey{Region: parts[0], Cluster: parts[1], Service: parts[2]}, parts[3], nil
}

// ringCommand turns a ring call's body into its command; bad input is lease.ErrBadRequest.
func ringCommand(ring lease.RingKey, action string, body []byte, atMs int64) (fsm.Command, error) {
	var c interface {
		fsm.Command
		Validate() error
	}
	switch action {
	case ActionPause:
		var req admin.PauseRequest
		if err := admin.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Pause{Ring: ring, Impl: req.Impl, Reason: req.Reason, AtMs: atMs}
	case ActionResume:
		var req admin.ResumeRequest
		if err := admin.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Resume{Ring: ring, Impl: req.Impl, AtMs: atMs}
	case ActionLimit:
		var req admin.LimitRequest
		if err := admin.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		switch {
		case req.Clear == (req.PerSecond != nil):
			return nil, fmt.Errorf(`%w: send {"per_second": N} to set the limit or {"clear": true} to remove it, one of the two`, lease.ErrBadRequest)
		case req.Clear:
			c = &fsm.Limit{Ring: ring, Clear: true, AtMs: atMs}
		case !(*req.PerSecond > 0):
			return nil, fmt.Errorf(`%w: per_second must be above 0, got %v (to remove the limit, send {"clear": true})`, lease.ErrBadRequest, *req.PerSecond)
		default:
			c = &fsm.Limit{Ring: ring, PerSecond: *req.PerSecond, AtMs: atMs}
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", lease.ErrBadRequest, err)
	}
	return c, nil
}

// mutation is the one way an admin call changes the replicated state. It reads the body, builds the command (bad input is answered 400 by any node, leader or not, and
// nothing is committed), then either forwards the call to the leader (a follower) or, on the
// leader, checks the command against a copy of the state, commits it and answers what answer
// reads from the state as committed. No leader, no quorum: 503; a server that may not know the
// command (the version gate): 409.
func (n *Node) mutation(w http.ResponseWriter, r *http.Request, build func(body []byte, atMs int64) (fsm.Command, error),
	answer func(s *fsm.State, leaderID string) any) {
	body, ok := admin.ReadBody(w, r)
	if !ok {
		return
	}
	cmd, err := build(body, n.clock.Now().UnixMilli())
	if err != nil {
		admin.WriteError(w, err)
		return
	}
	t := n.currentTerm()
	if t == nil || !t.isReady() {
		n.forward(w, r, body)
		return
	}
	var trial error
	n.fsm.View(func(s *fsm.State, _ uint64) { trial = s.Clone().Apply(cmd) })
	if trial != nil {
		admin.WriteError(w, commitErr(trial))
		return
	}
	if err := t.apply(cmd); err != nil {
		if errors.Is(err, lease.ErrNotLeader) || errors.Is(err, lease.ErrNoLeader) {
			// An HTTP caller cannot follow an RSocket address; its next call reaches the new
			// leader through any node.
			err = fmt.Errorf("%w: %s lost the lead while committing; the change may or may not be committed (every call is idempotent): retry",
				lease.ErrNoLeader, n.cfg.NodeID)
		}
		admin.WriteError(w, err)
		return
	}
	n.log.Info().Stringer("command", cmd.Type()).Interface("args", cmd).Str("remote", r.RemoteAddr).Msg("admin change committed")
	var out any
	n.fsm.View(func(s *fsm.State, _ uint64) { out = answer(s, n.cfg.NodeID) })
	admin.WriteJSON(w, http.StatusOK, out)
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

// forward sends an admin call to the leader's admin HTTP address and copies its answer back: the
// follower makes the call itself, with the caller's Authorization header, rather than redirecting
// (an HTTP client drops that header when a redirect changes the host).
func (n *Node) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if by := r.Header.Get(admin.HeaderForwardedBy); by != "" {
		admin.WriteError(w, fmt.Errorf("%w: %s forwarded this call to %s, which does not lead (an election may be under way); retry",
			lease.ErrNoLeader, by, n.cfg.NodeID))
		return
	}
	deadline := time.Now().Add(leaderWait)
	for {
		leaderID, addr, err := n.awaitLeaderToForward(r.Context(), time.Until(deadline))
		if err != nil {
			admin.WriteError(w, err)
			return
		}
		a, err := n.forwardOnce(r, body, leaderID, addr)
		if err != nil {
			admin.WriteError(w, err)
			return
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
		w.Header().Set("Content-Type", a.ContentType)
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
		return
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
