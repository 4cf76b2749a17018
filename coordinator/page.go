package coordinator

import (
	"net/http"
	"strconv"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/lease"
)

// PathPage is the ring page: GET / draws this node's view of the cluster and of every ring, for
// people. It reads the same view as GET /v1/ring and is never a safety input.
const PathPage = "/"

// servePage renders the ring page. ?refresh=N reloads it every N seconds (default 2, 0: never).
func (n *Node) servePage(w http.ResponseWriter, r *http.Request) {
	refresh := 2
	if q := r.URL.Query().Get("refresh"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 0 || v > 3600 {
			writeJSON(w, http.StatusBadRequest, lease.WireError{Code: lease.CodeBadRequest, Message: "refresh must be a number of seconds from 0 to 3600"})
			return
		}
		refresh = v
	}
	var history map[string][]admin.BacklogSample
	if t := n.currentTerm(); t != nil {
		history = t.backlog.series()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := admin.RenderPage(w, n.View(), history, n.clock.Now(), refresh); err != nil {
		n.log.Warn().Err(err).Msg("render the ring page")
	}
}
