package coordinator

import (
	"net/http"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retryring/retryring/coordinator/admin"
)

// httpHandler serves the admin API: package admin's server, every answer of which is admin's,
// over this node as adminNode shows it (the view, the changes, status and peers, the
// registrations, the admin token for the profiles) and its Prometheus registry.
func (n *Node) httpHandler() http.Handler {
	a := adminNode{n}
	s := admin.New(a, n.log)
	s.ServeChanges(a)
	s.ServeCluster(a)
	s.ServeRegistrations(a)
	s.ServeMetrics(promhttp.HandlerFor(n.metrics.registry, promhttp.HandlerOpts{}))
	s.ServeProfiles(n.cfg.Profiling, a)
	return s
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
