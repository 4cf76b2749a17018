package coordinator

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
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

// serveWorkerAction serves PathWorkers: a follower forwards the call to the leader; the leader
// finds the ring (from the body, or the one ring of its state with a member of that worker id)
// and mutation commits an fsm.Cordon once the trial shows the worker is a member.
func (n *Node) serveWorkerAction(w http.ResponseWriter, r *http.Request) {
	workerID, action, err := parseWorkerPath(r.URL.EscapedPath())
	if err != nil {
		admin.WriteJSON(w, http.StatusNotFound, lease.WireError{Code: "not_found", Message: err.Error()})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		admin.WriteJSON(w, http.StatusMethodNotAllowed, lease.WireError{Code: "method_not_allowed", Message: r.Method + " " + r.URL.Path})
		return
	}
	if t := n.currentTerm(); t == nil || !t.isReady() {
		// A follower sends the call on as it came: the leader looks the ring up in its own state,
		// which may know a worker that joined a moment ago and that this node has not applied yet.
		body, ok := admin.ReadBody(w, r)
		if !ok {
			return
		}
		n.forward(w, r, body)
		return
	}
	var ring lease.RingKey
	n.mutation(w, r, func(body []byte, _ int64) (fsm.Command, error) {
		var req admin.CordonRequest
		if err := admin.DecodeStrict(body, &req); err != nil {
			return nil, err
		}
		if req.Ring != nil {
			ring = *req.Ring
		} else if ring, err = n.ringOfWorker(workerID); err != nil {
			return nil, err
		}
		c := &fsm.Cordon{Ring: ring, WorkerID: workerID, Clear: action == ActionUncordon}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", lease.ErrBadRequest, err)
		}
		return c, nil
	}, func(s *fsm.State, leaderID string) any {
		ans := admin.CordonAnswer{Ring: ring, WorkerID: workerID, LeaderID: leaderID}
		if rs := s.Ring(ring); rs != nil {
			ans.Cordoned = rs.IsCordoned(workerID)
		}
		return ans
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

// ringOfWorker is the one ring that has a member of the worker id, in this node's state.
func (n *Node) ringOfWorker(workerID string) (lease.RingKey, error) {
	var rings []lease.RingKey
	n.fsm.View(func(s *fsm.State, _ uint64) {
		for _, r := range s.Rings {
			for _, m := range r.Members {
				if m.WorkerID == workerID {
					rings = append(rings, r.Key)
					break
				}
			}
		}
	})
	switch len(rings) {
	case 0:
		return lease.RingKey{}, fmt.Errorf("%w: no worker %q in any ring", lease.ErrUnknownWorker, workerID)
	case 1:
		return rings[0], nil
	}
	names := make([]string, len(rings))
	for i, k := range rings {
		names[i] = k.String()
	}
	sort.Strings(names)
	return lease.RingKey{}, fmt.Errorf("%w: worker %q is in %d rings (%s): name one", lease.ErrBadRequest, workerID, len(rings), strings.Join(names, ", "))
}
