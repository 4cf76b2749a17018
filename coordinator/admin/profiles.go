package admin

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/retryring/retryring/lease"
)

// Paths of the coordinator's metrics and profiles.
const (
	// PathMetrics answers GET with the coordinator's Prometheus metrics.
	PathMetrics = "/metrics"
	// PathProfiles is the prefix of Go's runtime profiles (the coordinator's --profiling).
	PathProfiles = "/debug/pprof/"
)

// AdminGate is the check of an admin bearer token that the edge makes of every call that changes
// something, for the calls that read but need the token all the same (the profiles).
type AdminGate interface {
	// RefuseAdmin checks the Authorization header of a call: refused, and what the caller is
	// told, when it carries no admin token this node accepts.
	RefuseAdmin(authorization string) (message string, refused bool)
}

// ServeMetrics adds GET PathMetrics, answered by h (the coordinator's Prometheus registry).
func (s *Server) ServeMetrics(h http.Handler) {
	s.Handle(PathMetrics, http.MethodGet, h.ServeHTTP)
}

// ServeProfiles adds Go's runtime profiles under PathProfiles: with on (--profiling) to callers
// the gate admits, else a 404 that names the flag. The edge lets a GET through without a token; a
// profile needs one all the same: a CPU profile costs the node CPU, and a heap or goroutine dump
// shows its internals.
func (s *Server) ServeProfiles(on bool, gate AdminGate) {
	s.HandlePrefix(PathProfiles, func(w http.ResponseWriter, r *http.Request) {
		if !on {
			WriteJSON(w, http.StatusNotFound, map[string]string{"error": "not_found",
				"message": r.URL.Path + ": profiling is off on this coordinator (start it with --profiling)"})
			return
		}
		if msg, refused := gate.RefuseAdmin(r.Header.Get("Authorization")); refused {
			WriteUnauthorized(w, "profiles: "+msg)
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
	})
}

// WriteUnauthorized answers 401 unauthorized with msg, and the bearer challenge.
func WriteUnauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="retryring"`)
	WriteJSON(w, http.StatusUnauthorized, lease.WireError{Code: lease.CodeUnauthorized, Message: msg})
}
