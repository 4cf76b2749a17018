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

// CodeUpgradeIncomplete is the admin API's error code for ErrUpgradeIncomplete (HTTP 409).
const CodeUpgradeIncomplete = "upgrade_incomplete"

// CodePeerConflict is the admin API's error code for ErrPeerConflict (HTTP 409).
const CodePeerConflict = "peer_conflict"

// HeaderForwardedBy marks an admin call a follower forwarded to the leader, with the follower's
// node id: a node that gets one and does not lead answers no_leader instead of forwarding it again
// (two nodes with stale views of the leader must not pass a call back and forth).
const HeaderForwardedBy = "Retryring-Forwarded-By"

// leaderWait bounds how long a follower waits for a leader whose admin address it knows before it
// answers a call it would forward no_leader: an election after the leader's removal or loss fits
// in it, and with forwardTimeout it stays within ctl's 15 s for a mutation.
const leaderWait = 5 * time.Second

// forwardTimeout bounds a follower's call to the leader, commit included.
const forwardTimeout = 5 * time.Second

// maxAdminBody bounds the body of an admin call.
const maxAdminBody = 64 << 10

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
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Pause{Ring: ring, Impl: req.Impl, Reason: req.Reason, AtMs: atMs}
	case ActionResume:
		var req admin.ResumeRequest
		if err := decodeStrict(body, &req); err != nil {
			return nil, err
		}
		c = &fsm.Resume{Ring: ring, Impl: req.Impl, AtMs: atMs}
	case ActionLimit:
		var req admin.LimitRequest
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
	if by := r.Header.Get(HeaderForwardedBy); by != "" {
		writeAdminError(w, fmt.Errorf("%w: %s forwarded this call to %s, which does not lead (an election may be under way); retry",
			lease.ErrNoLeader, by, n.cfg.NodeID))
		return
	}
	deadline := time.Now().Add(leaderWait)
	for {
		leaderID, addr, err := n.awaitLeaderToForward(r.Context(), time.Until(deadline))
		if err != nil {
			writeAdminError(w, err)
			return
		}
		a, err := n.forwardOnce(r, body, leaderID, addr)
		if err != nil {
			writeAdminError(w, err)
			return
		}
		// The node taken for the leader answered that it does not lead: it lost the lead (or was
		// removed) after this node last heard of it. Ask Raft again, within the same wait; every
		// admin call is idempotent, so one whose commit the old leader may have made is safe to
		// make again.
		if a.noLeader() && time.Now().Before(deadline) && r.Context().Err() == nil {
			select {
			case <-r.Context().Done():
			case <-n.stop:
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.Header().Set("Content-Type", a.contentType)
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
		return
	}
}

// forwarded is a leader's answer to a forwarded admin call.
type forwarded struct {
	status      int
	contentType string
	body        []byte
}

func (a forwarded) noLeader() bool {
	var e struct {
		Error string `json:"error"`
	}
	return a.status == http.StatusServiceUnavailable && json.Unmarshal(a.body, &e) == nil && e.Error == lease.CodeNoLeader
}

// forwardOnce makes the call r (with body) to the leader leaderID at addr.
func (n *Node) forwardOnce(r *http.Request, body []byte, leaderID, addr string) (forwarded, error) {
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.peerURL(addr, r.URL.RequestURI()), bytes.NewReader(body))
	if err != nil {
		return forwarded{}, fmt.Errorf("%w: %w", lease.ErrInternal, err)
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
		return forwarded{}, fmt.Errorf("%w: leader %s: %w", lease.ErrUnavailable, leaderID, mismatch)
	}
	if err != nil {
		return forwarded{}, fmt.Errorf("%w: leader %s at %s did not answer: %w", lease.ErrUnavailable, leaderID, addr, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return forwarded{}, fmt.Errorf("%w: leader %s's answer: %w", lease.ErrUnavailable, leaderID, err)
	}
	return forwarded{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: answer}, nil
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
	admin.WriteJSON(w, status, lease.WireError{Code: code, Message: strings.TrimPrefix(err.Error(), code+": ")})
}
