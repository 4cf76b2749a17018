package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/retryring/retryring/lease"
)

// Paths of the admin HTTP API that this package serves itself.
const (
	// PathPage is the ring page: GET / draws this node's view of the cluster and of every ring,
	// for people. It reads the same view as GET /v1/ring and is never a safety input.
	PathPage = "/"
	// PathRing answers GET with the node's RingView as JSON.
	PathRing = "/v1/ring"
	// PathHealthz answers GET while the process serves HTTP at all.
	PathHealthz = "/healthz"
	// PathReadyz answers GET with the node's Readiness: 200 when ready, else 503.
	PathReadyz = "/readyz"
)

// Node is what the admin API needs of the coordinator it serves. It is defined here, where it is
// used, and kept small: the coordinator implements it, and this package never sees Raft or the
// replicated state.
type Node interface {
	// ID is the coordinator's node id.
	ID() string
	// View is this node's view of the cluster and of every ring.
	View() RingView
	// BacklogSamples are the leader's backlog samples by ring name, oldest first; nil on a
	// follower.
	BacklogSamples() map[string][]BacklogSample
	// Now is the node's clock, which the page's ages and lease times are counted on.
	Now() time.Time
	// Readiness says whether the node is ready and why not.
	Readiness() Readiness
	// Authorize is the HTTP edge, asked before any handler: it answers a refused call itself
	// (401) and reports false.
	Authorize(w http.ResponseWriter, r *http.Request) bool
}

// Server is the admin HTTP API of one coordinator: the edge (Node.Authorize), the routes, and the
// JSON answers of unknown paths (404) and wrong methods (405). It serves the view and the page
// itself, and the other calls once given what they need of the node (ServeChanges, ServeCluster,
// ServeRegistrations, ServeMetrics, ServeProfiles).
type Server struct {
	node      Node
	changer   Changer   // nil until ServeChanges
	cluster   Cluster   // nil until ServeCluster
	registrar Registrar // nil until ServeRegistrations
	log       zerolog.Logger
	routes    map[string]route
	prefixes  []prefixRoute
}

type route struct {
	method  string
	handler http.HandlerFunc
}

type prefixRoute struct {
	prefix  string
	handler http.HandlerFunc
}

// New returns the admin API of node; log gets what a client cannot be told (a page that failed
// half-way through its writing).
func New(node Node, log zerolog.Logger) *Server {
	s := &Server{node: node, log: log, routes: map[string]route{}}
	s.Handle(PathPage, http.MethodGet, s.servePage)
	s.Handle(PathRing, http.MethodGet, s.serveRing)
	s.Handle(PathHealthz, http.MethodGet, s.serveHealthz)
	s.Handle(PathReadyz, http.MethodGet, s.serveReadyz)
	return s
}

// Handle serves path with h for method (GET takes HEAD too); any other method is answered 405.
func (s *Server) Handle(path, method string, h http.HandlerFunc) {
	s.routes[path] = route{method: method, handler: h}
}

// HandlePrefix gives h every call whose path starts with prefix, whatever its method: h answers
// the wrong ones itself.
func (s *Server) HandlePrefix(prefix string, h http.HandlerFunc) {
	s.prefixes = append(s.prefixes, prefixRoute{prefix: prefix, handler: h})
}

// ServeHTTP serves the admin API. Every answer is JSON, errors included: unknown paths 404, a
// known path with the wrong method 405; except the ring page (HTML) and /metrics (Prometheus).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.node.Authorize(w, r) {
		return
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(r.URL.Path, p.prefix) {
			p.handler(w, r)
			return
		}
	}
	rt, ok := s.routes[r.URL.Path]
	allowed := r.Method == rt.method || (rt.method == http.MethodGet && r.Method == http.MethodHead)
	switch {
	case !ok:
		WriteJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "message": r.URL.Path})
	case !allowed:
		w.Header().Set("Allow", rt.method)
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed", "message": r.Method + " " + r.URL.Path})
	default:
		rt.handler(w, r)
	}
}

// WriteJSON answers with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) serveRing(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, s.node.View())
}

func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "coordinator_id": s.node.ID()})
}

// serveReadyz is 200 once a leader is known and this node has applied the log up to the commit
// index it last learned from the leader (a follower learns it with every append and heartbeat).
func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	rd := s.node.Readiness()
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	WriteJSON(w, status, rd)
}

// servePage renders the ring page. ?refresh=N reloads it every N seconds (default 2, 0: never).
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	refresh := 2
	if q := r.URL.Query().Get("refresh"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 0 || v > 3600 {
			WriteJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: "refresh must be a number of seconds from 0 to 3600"})
			return
		}
		refresh = v
	}
	history := s.node.BacklogSamples()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := RenderPage(w, s.node.View(), history, s.node.Now(), refresh); err != nil {
		s.log.Warn().Err(err).Msg("render the ring page")
	}
}
