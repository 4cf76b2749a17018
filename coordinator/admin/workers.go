package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// PathWorkers is the prefix of the per-worker admin calls, each a POST of a CordonRequest:
//
//	POST /v1/workers/{worker_id}/cordon
//	POST /v1/workers/{worker_id}/uncordon
//
// Each answers CordonAnswer. The worker id is one path segment, escaped as URLs escape it.
const PathWorkers = "/v1/workers/"

// Actions on a worker.
const (
	ActionCordon   = "cordon"
	ActionUncordon = "uncordon"
)

// serveWorkerCall serves PathWorkers: a follower forwards the call to the leader as it came; the
// leader reads the body, finds the ring (from the body, or the one ring of its state with a
// member of that worker id) and commits the cordon once its trial shows the worker is a member.
func (s *Server) serveWorkerCall(w http.ResponseWriter, r *http.Request) {
	workerID, action, err := parseWorkerPath(r.URL.EscapedPath())
	if !callPathAndMethod(w, r, err) {
		return
	}
	if !s.changer.Leads() {
		body, ok := ReadBody(w, r)
		if !ok {
			return
		}
		s.forward(w, r, body)
		return
	}
	s.change(w, r, func(body []byte) (Change, error) {
		c := Cordon{WorkerID: workerID, Clear: action == ActionUncordon}
		if err := DecodeStrict(body, &c.CordonRequest); err != nil {
			return nil, err
		}
		return c, nil
	}, func(c Committed) any {
		return CordonAnswer{Ring: c.Ring, WorkerID: workerID, Cordoned: c.Cordoned, LeaderID: s.node.ID()}
	})
}

// parseWorkerPath reads /v1/workers/{worker_id}/{action}.
func parseWorkerPath(escaped string) (string, string, error) {
	usage := fmt.Errorf("want POST %s{worker_id}/%s|%s", PathWorkers, ActionCordon, ActionUncordon)
	parts := strings.Split(strings.TrimPrefix(escaped, PathWorkers), "/")
	if len(parts) != 2 {
		return "", "", usage
	}
	id, err := url.PathUnescape(parts[0])
	if err != nil || id == "" {
		return "", "", usage
	}
	switch parts[1] {
	case ActionCordon, ActionUncordon:
		return id, parts[1], nil
	}
	return "", "", fmt.Errorf("no action %q: %w", parts[1], usage)
}
