package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/fsm"
	"github.com/retryring/retryring/lease"
)

// Paths of the admin HTTP API.
const (
	PathRing     = "/v1/ring"
	PathHealthz  = "/healthz"
	PathReadyz   = "/readyz"
	PathRegister = "/v1/internal/register"
	PathMetrics  = "/metrics"
	// PathProfiles is the prefix of Go's runtime profiles (Config.Profiling).
	PathProfiles = "/debug/pprof/"
)

type route struct {
	method  string
	handler http.HandlerFunc
}

// httpHandler serves the admin API. Every answer is JSON, errors included: unknown paths 404,
// a known path with the wrong method 405; except the ring page (HTML) and /metrics (Prometheus).
func (n *Node) httpHandler() http.Handler {
	routes := map[string]route{
		PathPage:     {http.MethodGet, n.servePage},
		PathMetrics:  {http.MethodGet, n.serveMetrics},
		PathRing:     {http.MethodGet, n.serveRing},
		PathHealthz:  {http.MethodGet, n.serveHealthz},
		PathReadyz:   {http.MethodGet, n.serveReadyz},
		PathRegister: {http.MethodPost, n.serveRegister},
		PathStatus:   {http.MethodGet, n.serveStatus},
		PathPeers:    {http.MethodGet, n.servePeers},
		PathStepDown: {http.MethodPost, n.serveStepDown},
		// membership.go
		PathJoin:       {http.MethodPost, n.serveJoin},
		PathAddPeer:    {http.MethodPost, n.serveAddPeer},
		PathRemovePeer: {http.MethodPost, n.serveRemovePeer},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !n.authorizeHTTP(w, r) {
			return
		}
		if strings.HasPrefix(r.URL.Path, PathRings) {
			n.serveRingAction(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, PathProfiles) {
			n.serveProfiles(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, PathWorkers) {
			n.serveWorkerAction(w, r)
			return
		}
		rt, ok := routes[r.URL.Path]
		allowed := r.Method == rt.method || (rt.method == http.MethodGet && r.Method == http.MethodHead)
		switch {
		case !ok:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": r.URL.Path})
		case !allowed:
			w.Header().Set("Allow", rt.method)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed", "message": r.Method + " " + r.URL.Path})
		default:
			rt.handler(w, r)
		}
	})
}

// serveProfiles serves net/http/pprof's handlers when Config.Profiling is set. authorizeHTTP
// let a GET through; a profile needs the admin token all the same (Config.Profiling says why).
func (n *Node) serveProfiles(w http.ResponseWriter, r *http.Request) {
	if !n.cfg.Profiling {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found",
			"message": r.URL.Path + ": profiling is off on this coordinator (start it with --profiling)"})
		return
	}
	if refusal := n.auth.Admin(r.Header.Get("Authorization")); refusal != nil {
		n.metrics.refused(refusedAdmin)
		writeUnauthorized(w, "profiles: "+refusal.Message)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, PathProfiles) {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	default:
		pprof.Index(w, r) // the index, and heap, goroutine, allocs, block, mutex by name
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (n *Node) serveRing(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, n.View())
}

func (n *Node) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "coordinator_id": n.cfg.NodeID})
}

// readiness is the answer of GET /readyz.
type readiness struct {
	Ready        bool   `json:"ready"`
	Reason       string `json:"reason,omitempty"`
	LeaderID     string `json:"leader_id"`
	AppliedIndex uint64 `json:"applied_index"`
	CommitIndex  uint64 `json:"commit_index"`
}

// serveReadyz is 200 once a leader is known and this node has applied the log up to the commit
// index it last learned from the leader (a follower learns it with every append and heartbeat).
func (n *Node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	rd := n.readiness()
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, rd)
}

// readiness is what GET /readyz and GET /v1/status say of this node's readiness.
func (n *Node) readiness() readiness {
	rd := readiness{}
	if n.raft == nil {
		rd.Reason = "not started"
		return rd
	}
	_, leader := n.raft.LeaderWithID()
	rd.LeaderID = string(leader)
	rd.CommitIndex = n.raft.CommitIndex()
	rd.AppliedIndex = n.raft.AppliedIndex()
	switch halted := n.fsm.Halted(); {
	case halted != nil:
		rd.Reason = fmt.Sprintf("the replicated state stopped applying (FSM version %d): %v", n.fsm.Version(), halted)
	case leader == "":
		rd.Reason = "no leader known"
	case rd.AppliedIndex < rd.CommitIndex:
		rd.Reason = fmt.Sprintf("applied index %d behind commit index %d", rd.AppliedIndex, rd.CommitIndex)
	default:
		rd.Ready = true
	}
	return rd
}

// serveRegister commits a coordinator's addresses; only the leader accepts, and only voters of the
// Raft configuration may register.
func (n *Node) serveRegister(w http.ResponseWriter, r *http.Request) {
	var c fsm.Coordinator
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRegistrationBody))
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err != nil || c.ID == "" || c.RSocketAddr == "" || c.HTTPAddr == "" {
		writeJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: "want a JSON coordinator with id, rsocket_addr and http_addr"})
		return
	}
	if !n.inConfiguration(c.ID) {
		writeJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: strconv.Quote(c.ID) + " is not in the raft configuration"})
		return
	}
	switch unchanged, err := n.checkRegistration(c); {
	case err != nil:
		writeJSON(w, http.StatusBadRequest, lease.ToWire(err))
		return
	case unchanged:
		writeJSON(w, http.StatusOK, lease.Ack{OK: true})
		return
	}
	if err := n.apply(&fsm.RegisterCoordinator{Coordinator: c}); err != nil {
		we := lease.ToWire(err)
		status := http.StatusServiceUnavailable
		if errors.Is(err, lease.ErrBadRequest) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, we)
		return
	}
	writeJSON(w, http.StatusOK, lease.Ack{OK: true})
}

func (n *Node) inConfiguration(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			return true
		}
	}
	return false
}
