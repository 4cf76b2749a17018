package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/retryring/retryring/lease"
)

// PathRings is the prefix of the per-ring admin calls, each a POST of a JSON body:
//
//	POST /v1/rings/{region}/{cluster}/{service}/pause      PauseRequest
//	POST /v1/rings/{region}/{cluster}/{service}/resume     ResumeRequest
//	POST /v1/rings/{region}/{cluster}/{service}/limit      LimitRequest
//	POST /v1/rings/{region}/{cluster}/{service}/movement   MovementRequest
//
// Each answers ControlsAnswer, the controls as committed (movement: MovementAnswer). The names
// are path segments, escaped as URLs escape them (a "/" in a name is %2F).
const PathRings = "/v1/rings/"

// Actions on a ring.
const (
	ActionPause    = "pause"
	ActionResume   = "resume"
	ActionLimit    = "limit"
	ActionMovement = "movement"
)

// serveRingCall serves PathRings: it finds the ring and the action, and reads the change from
// the body; change does the rest.
func (s *Server) serveRingCall(w http.ResponseWriter, r *http.Request) {
	ring, action, err := parseRingPath(r.URL.EscapedPath())
	if !callPathAndMethod(w, r, err) {
		return
	}
	s.change(w, r, func(body []byte) (Change, error) { return ReadRingChange(ring, action, body) }, func(c Committed) any {
		if action == ActionMovement {
			return MovementAnswer{Ring: ring, Movement: c.Movement, LeaderID: s.node.ID()}
		}
		return ControlsAnswer{Ring: ring, Controls: c.Controls, LeaderID: s.node.ID()}
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

// ReadRingChange reads the body of a ring call (action, on ring) into its change, checked as far
// as this package can without the replicated state; bad input is lease.ErrBadRequest.
func ReadRingChange(ring lease.RingKey, action string, body []byte) (Change, error) {
	switch action {
	case ActionPause:
		var req PauseRequest
		if err := DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		return Pause{Ring: ring, PauseRequest: req}, nil
	case ActionResume:
		var req ResumeRequest
		if err := DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		return Resume{Ring: ring, ResumeRequest: req}, nil
	case ActionMovement:
		var req MovementRequest
		if err := DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		return SetMovement{Ring: ring, MovementRequest: req}, nil
	}
	var req LimitRequest
	if err := DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Clear == (req.PerSecond != nil):
		return nil, fmt.Errorf(`%w: send {"per_second": N} to set the limit or {"clear": true} to remove it, one of the two`, lease.ErrBadRequest)
	case req.Clear:
		return Limit{Ring: ring, Clear: true}, nil
	case !(*req.PerSecond > 0):
		return nil, fmt.Errorf(`%w: per_second must be above 0, got %v (to remove the limit, send {"clear": true})`, lease.ErrBadRequest, *req.PerSecond)
	}
	return Limit{Ring: ring, PerSecond: *req.PerSecond}, nil
}
