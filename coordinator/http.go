package coordinator

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/retryring/retryring/coordinator/admin"
)

// Paths of the admin HTTP API served by the coordinator's own handlers (package admin serves
// admin.PathPage, admin.PathRing, admin.PathHealthz and admin.PathReadyz).
const (
	PathMetrics = "/metrics"
	// PathProfiles is the prefix of Go's runtime profiles (Config.Profiling).
	PathProfiles = "/debug/pprof/"
)

// httpHandler serves the admin API: package admin's server (the edge, the routes, the view and
// the page) with the routes whose handlers read or change Raft and the replicated state here.
func (n *Node) httpHandler() http.Handler {
	s := admin.New(adminNode{n}, n.log)
	s.ServeChanges(adminNode{n})
	s.ServeCluster(adminNode{n})
	s.Handle(PathMetrics, http.MethodGet, n.serveMetrics)
	s.ServeRegistrations(adminNode{n})
	s.HandlePrefix(PathProfiles, n.serveProfiles)
	return s
}

// serveProfiles serves net/http/pprof's handlers when Config.Profiling is set. authorizeHTTP
// let a GET through; a profile needs the admin token all the same (Config.Profiling says why).
func (n *Node) serveProfiles(w http.ResponseWriter, r *http.Request) {
	if !n.cfg.Profiling {
		admin.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "not_found",
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

// inConfiguration reports whether id is a server of the Raft configuration.
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
