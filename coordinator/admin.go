package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

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

// CodeUpgradeIncomplete is the admin API's error code for ErrUpgradeIncomplete (HTTP 409).
const CodeUpgradeIncomplete = "upgrade_incomplete"

// CodePeerConflict is the admin API's error code for ErrPeerConflict (HTTP 409).
const CodePeerConflict = "peer_conflict"

// HeaderForwardedBy marks an admin call a follower forwarded to the leader, with the follower's
// node id: a node that gets one and does not lead answers no_leader instead of forwarding it again
// (two nodes with stale views of the leader must not pass a call back and forth).
const HeaderForwardedBy = "Retryring-Forwarded-By"

// leaderAddrWait bounds how long a follower waits to learn the leader's admin address from its
// log before it answers a call it would forward no_leader.
const leaderAddrWait = 2 * time.Second

// forwardTimeout bounds a follower's call to the leader, commit included.
const forwardTimeout = 5 * time.Second

// maxAdminBody bounds the body of an admin call.
const maxAdminBody = 64 << 10

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

// serveRingAction serves PathRings: it finds the ring and the action, and builds the command from
// the body; mutation does the rest.
func (n *Node) serveRingAction(w http.ResponseWriter, r *http.Request) {
	ring, action, err := parseRingPath(r.URL.EscapedPath())
	if err != nil {
		writeJSON(w, http.StatusNotFound, lease.WireError{Code: "not_found", Message: err.Error()})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, lease.WireError{Code: "method_not_allowed", Message: r.Method + " " + r.URL.Path})
		return
	}
	if action == ActionMovement {
		n.mutation(w, r, func(body []byte, atMs int64) (fsm.Command, error) {
			return movementCommand(ring, body, atMs)
		}, func(s *fsm.State, leaderID string) any {
			return MovementAnswer{Ring: ring, Movement: movementView(s.Ring(ring)), LeaderID: leaderID}
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
		return ControlsAnswer{Ring: ring, Controls: controlsView(c), LeaderID: leaderID}
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
		var req PauseRequest
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Pause{Ring: ring, Impl: req.Impl, Reason: req.Reason, AtMs: atMs}
	case ActionResume:
		var req ResumeRequest
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Resume{Ring: ring, Impl: req.Impl, AtMs: atMs}
	case ActionLimit:
		var req LimitRequest
		if err := decodeStrict(body, &req); err != nil {
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

// decodeStrict reads a JSON object into v, refusing unknown fields and anything after it; an
// empty body is {}.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %w", lease.ErrBadRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: body: data after the JSON object", lease.ErrBadRequest)
	}
	return nil
}

// readAdminBody reads the body of an admin call, at most maxAdminBody bytes; it answers 400 itself
// and reports false when the body is unreadable or larger. The caller was admitted at the HTTP
// edge already (authorizeHTTP checks the bearer token of every mutating call, before a follower
// forwards it with the header and the leader checks it again).
func readAdminBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	switch {
	case err != nil:
		writeAdminError(w, fmt.Errorf("%w: read the body: %w", lease.ErrBadRequest, err))
		return nil, false
	case len(body) > maxAdminBody:
		writeAdminError(w, fmt.Errorf("%w: the body is larger than %d bytes", lease.ErrBadRequest, maxAdminBody))
		return nil, false
	}
	return body, true
}

// mutation is the one way an admin call changes the replicated state. It reads the body, builds the command (bad input is answered 400 by any node, leader or not, and
// nothing is committed), then either forwards the call to the leader (a follower) or, on the
// leader, checks the command against a copy of the state, commits it and answers what answer
// reads from the state as committed. No leader, no quorum: 503; a server that may not know the
// command (the version gate): 409.
func (n *Node) mutation(w http.ResponseWriter, r *http.Request, build func(body []byte, atMs int64) (fsm.Command, error),
	answer func(s *fsm.State, leaderID string) any) {
	body, ok := readAdminBody(w, r)
	if !ok {
		return
	}
	cmd, err := build(body, n.clock.Now().UnixMilli())
	if err != nil {
		writeAdminError(w, err)
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
		writeAdminError(w, commitErr(trial))
		return
	}
	if err := t.apply(cmd); err != nil {
		if errors.Is(err, lease.ErrNotLeader) || errors.Is(err, lease.ErrNoLeader) {
			// An HTTP caller cannot follow an RSocket address; its next call reaches the new
			// leader through any node.
			err = fmt.Errorf("%w: %s lost the lead while committing; the change may or may not be committed (every call is idempotent): retry",
				lease.ErrNoLeader, n.cfg.NodeID)
		}
		writeAdminError(w, err)
		return
	}
	n.log.Info().Stringer("command", cmd.Type()).Interface("args", cmd).Str("remote", r.RemoteAddr).Msg("admin change committed")
	var out any
	n.fsm.View(func(s *fsm.State, _ uint64) { out = answer(s, n.cfg.NodeID) })
	writeJSON(w, http.StatusOK, out)
}

// forward sends an admin call to the leader's admin HTTP address and copies its answer back: the
// follower makes the call itself, with the caller's Authorization header, rather than redirecting
// (an HTTP client drops that header when a redirect changes the host).
func (n *Node) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	if by := r.Header.Get(HeaderForwardedBy); by != "" {
		writeAdminError(w, fmt.Errorf("%w: %s forwarded this call to %s, which does not lead (an election may be under way); retry",
			lease.ErrNoLeader, by, n.cfg.NodeID))
		return
	}
	_, lid := n.raft.LeaderWithID()
	leaderID, addr := string(lid), ""
	n.fsm.View(func(s *fsm.State, _ uint64) {
		if c := s.Coordinators[leaderID]; c != nil {
			addr = c.HTTPAddr
		}
	})
	switch {
	case leaderID == "":
		writeAdminError(w, fmt.Errorf("%w: no leader known (an election is under way, or quorum is lost)", lease.ErrNoLeader))
		return
	case leaderID == n.cfg.NodeID:
		writeAdminError(w, fmt.Errorf("%w: this node is taking or leaving the lead; retry", lease.ErrNoLeader))
		return
	case addr == "":
		// For a moment after a restart this node knows the leader from Raft but has not applied
		// the log that holds its registration: wait for that rather than fail the call.
		if addr = n.awaitPeerHTTPAddr(r.Context(), leaderID, leaderAddrWait); addr == "" {
			writeAdminError(w, fmt.Errorf("%w: leader %s has not registered its address yet", lease.ErrNoLeader, leaderID))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.peerURL(addr, r.URL.RequestURI()), bytes.NewReader(body))
	if err != nil {
		writeAdminError(w, fmt.Errorf("%w: %w", lease.ErrInternal, err))
		return
	}
	for _, h := range []string{"Content-Type", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(HeaderForwardedBy, n.cfg.NodeID)
	// This node checked the call at its own edge; a forwarded /v1/internal/ call (a join asked of a
	// follower) reaches the leader as this coordinator's.
	n.signInternal(req)
	resp, err := n.peerHTTPClient(0).Do(req)
	if mismatch := n.explainPeerHTTP(addr, resp, err); mismatch != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		writeAdminError(w, fmt.Errorf("%w: leader %s: %w", lease.ErrUnavailable, leaderID, mismatch))
		return
	}
	if err != nil {
		writeAdminError(w, fmt.Errorf("%w: leader %s at %s did not answer: %w", lease.ErrUnavailable, leaderID, addr, err))
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		writeAdminError(w, fmt.Errorf("%w: leader %s's answer: %w", lease.ErrUnavailable, leaderID, err))
		return
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// writeAdminError answers an admin call with the error's code and message: 400 bad_request, 409
// upgrade_incomplete, 404 unknown_worker, 503 no_leader or unavailable, 500 internal. The message leaves out the
// code it starts with.
func writeAdminError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, lease.ToWire(err).Code
	switch {
	case errors.Is(err, ErrUpgradeIncomplete):
		status, code = http.StatusConflict, CodeUpgradeIncomplete
	case errors.Is(err, ErrPeerConflict):
		status, code = http.StatusConflict, CodePeerConflict
	case errors.Is(err, lease.ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, lease.ErrUnknownWorker):
		status = http.StatusNotFound
	case errors.Is(err, lease.ErrNoLeader):
		status = http.StatusServiceUnavailable
	case errors.Is(err, lease.ErrUnavailable):
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, lease.WireError{Code: code, Message: strings.TrimPrefix(err.Error(), code+": ")})
}
